"""A real Label Studio server for tests: its own virtual environment, started on a free port, stopped after.

Label Studio pins many packages (Django, DRF, boto3, ...), so it lives in `<repo>/.venv-label-studio`, apart
from Budgetlab's `.venv`. This module uses only the standard library, so `make label-studio` can run it with
the system python before Budgetlab's environment exists:

    python3 tests/labels/label_studio_server.py install

The helpers that act for annotators talk to Label Studio's API directly (urllib), not through the client under
test, so a bug in the client cannot hide itself.
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

LABEL_STUDIO_VERSION = "1.23.2"
REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-label-studio"
STAMP = VENV / f".label-studio-{LABEL_STUDIO_VERSION}-installed"
LABEL_STUDIO_BIN = VENV / "bin" / "label-studio"
# A data dir whose SQLite database is already migrated: migrating a fresh one takes 1-3 minutes on a busy
# 2-core machine, starting on a copy of this one about 15 s.
TEMPLATE = VENV / f"template-data-{LABEL_STUDIO_VERSION}"


def venv_ready() -> bool:
    return STAMP.exists() and LABEL_STUDIO_BIN.exists() and (TEMPLATE / "label_studio.sqlite3").exists()


def ensure_venv(python: str = "python3") -> Path:
    """Create the Label Studio venv unless its stamp says it is complete; return the `label-studio` path."""
    if venv_ready():
        return LABEL_STUDIO_BIN
    if not (VENV / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q"]
    for args in (["--upgrade", "pip"], [f"label-studio=={LABEL_STUDIO_VERSION}"]):
        # Captured: pip can warn once per package (e.g. about unreadable local indexes); only failures matter.
        done = subprocess.run(pip + args, capture_output=True, text=True)
        if done.returncode != 0:
            problems = [line for line in done.stderr.splitlines() if "is ignored: it is neither" not in line]
            raise RuntimeError(f"pip install {' '.join(args)} failed:\n" + "\n".join(problems[-40:]))
    _build_template()
    STAMP.write_text(f"label-studio=={LABEL_STUDIO_VERSION}\n")
    return LABEL_STUDIO_BIN


def _build_template() -> None:
    """Migrate an empty database once (any command migrates before it runs; `version` does nothing else)."""
    building = TEMPLATE.with_name(TEMPLATE.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    env = _server_env(building)
    done = subprocess.run(
        [str(LABEL_STUDIO_BIN), "version", "--data-dir", str(building)],
        cwd=building,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not (building / "label_studio.sqlite3").exists():
        raise RuntimeError(f"label-studio could not migrate its database:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    shutil.rmtree(TEMPLATE, ignore_errors=True)
    building.rename(TEMPLATE)


def _server_env(data_dir: Path) -> dict[str, str]:
    env = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir)}
    for inherited in ("VIRTUAL_ENV", "PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL"):
        env.pop(inherited, None)  # ours must not leak into its Django
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LabelStudioServer:
    """A running server and an admin whose legacy token is `token`; helpers act as its annotators."""

    url: str
    token: str
    username: str
    password: str
    process: subprocess.Popen
    log_path: Path
    startup_seconds: float = 0.0
    _annotators: dict[str, int] = field(default_factory=dict)

    def api(self, method: str, path: str, body: object = None, token: str | None = None) -> object:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Token {token or self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def tasks(self, project_id: int) -> list[dict]:
        answer = self.api("GET", f"/api/tasks/?project={project_id}&page_size=1000")
        return answer["tasks"] if isinstance(answer, dict) else answer

    def annotator(self, email: str) -> int:
        """The id of an annotator account in the admin's organization, created on first use."""
        if email not in self._annotators:
            user = self.api("POST", "/api/users/", {"email": email, "username": email.split("@")[0]})
            self._annotators[email] = user["id"]
        return self._annotators[email]

    def submit_answer(self, task_id: int, text: str, annotator: str | None = None) -> dict:
        """Submit a TextArea answer the way the labeling UI does, credited to `annotator` (else the admin)."""
        result = [{"from_name": "answer", "to_name": "prompt", "type": "textarea", "value": {"text": [text]}}]
        body: dict = {"result": result}
        if annotator is not None:
            body["completed_by"] = self.annotator(annotator)
        return self.api("POST", f"/api/tasks/{task_id}/annotations/", body)

    def personal_access_token(self) -> str:
        """A new personal access token (a JWT refresh token) for the admin."""
        return self.api("POST", "/api/token/")["token"]

    def delete_project(self, project_id: int) -> None:
        self.api("DELETE", f"/api/projects/{project_id}/")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start_server(data_dir: Path, timeout: float = 180) -> LabelStudioServer:
    """Start Label Studio on 127.0.0.1 with SQLite under data_dir and wait until /health answers."""
    binary = ensure_venv()
    shutil.copytree(TEMPLATE, data_dir, dirs_exist_ok=True)
    port = free_port()
    # A letter first: a password starting with "-" (1 in 64 of token_urlsafe's) reads as an option to argparse.
    username, password = "admin@budgetlab.test", "pw" + secrets.token_urlsafe(12)
    token = secrets.token_hex(20)  # shaped like Label Studio's own legacy tokens
    # The admin is created at start with our token. New organizations in 1.2x have legacy tokens switched off,
    # hence --enable-legacy-api-token; personal access tokens stay on and are tested too.
    command = [
        str(binary), "start", "--no-browser",
        "--internal-host", "127.0.0.1", "--port", str(port),
        "--data-dir", str(data_dir),
        "--username", username, "--password", password, "--user-token", token,
        "--enable-legacy-api-token", "--log-level", "WARNING",
    ]  # fmt: skip
    env = _server_env(data_dir)
    log_path = data_dir / "label-studio.log"
    started = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=data_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = LabelStudioServer(f"http://127.0.0.1:{port}", token, username, password, process, log_path)
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"label-studio exited with {process.returncode}:\n{_tail(log_path)}")
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=2) as response:
                if response.status == 200:
                    server.startup_seconds = time.monotonic() - started
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"label-studio did not answer /health within {timeout:g} s:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit(f"usage: {sys.argv[0]} install")
    if not venv_ready():
        print(f"creating {VENV} with label-studio=={LABEL_STUDIO_VERSION} (takes a few minutes) ...", flush=True)
        began = time.monotonic()
        ensure_venv()
        print(f"label-studio installed in {time.monotonic() - began:.0f} s", flush=True)
