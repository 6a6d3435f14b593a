"""The embedded default as `make run` starts it: `budgetlab serve` with no DATABASE_URL or
CELERY_BROKER_URL — SQLite database, SQLite broker and a local worker under BUDGETLAB_DATA_DIR."""

import os
import signal
import socket
import subprocess
import sys
import time

import httpx

from tests.conftest import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_on_sqlite_runs_the_whole_flow(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL",
                                                            "BUDGETLAB_ADMIN_TOKEN")}
    env.update(BUDGETLAB_DATA_DIR=str(tmp_path / "data"), BUDGETLAB_PORT=str(port))
    if "BUDGETLAB_TEST_ARTIFACTS" in os.environ:
        env["BUDGETLAB_ARTIFACT_DIR"] = os.environ["BUDGETLAB_TEST_ARTIFACTS"]
    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "backend.cli", "serve"], cwd=ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        token = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and token is None:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            for line in (tmp_path / "serve.log").read_text().splitlines():
                if "Admin token" in line:
                    token = line.rsplit(":", 1)[1].strip()
            time.sleep(0.2)
        assert token, "serve did not print an admin token at first start"
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        while time.monotonic() < deadline:
            try:
                if client.get("/api/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert client.get("/api/pools", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert (tmp_path / "data" / "budgetlab.db").exists()

        pool = client.post("/api/pools/demo").json()
        probe = client.post("/api/probes", json={"pool_id": pool["id"], "model": "tiny-random-SmolLM2",
                                                 "k": 4, "max_new_tokens": 8}).json()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            job = client.get(f"/api/jobs/{probe['job_id']}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.5)
        assert job["status"] == "succeeded", (job, (tmp_path / "serve.log").read_text()[-3000:])
        assert (tmp_path / "data" / "broker.db").exists()

        assert client.get(f"/api/probes/{probe['id']}/difficulty").json()["summary"]["count"] == pool["prompt_count"]
        request = {"probe_id": probe["id"], "strategy": "learnable", "budget": {"kind": "count", "value": 20}}
        assert client.post("/api/selections/preview", json=request).json()["n"] == 20
        subset = client.post("/api/subsets", json=request).json()
        csv_text = client.get(f"/api/subsets/{subset['id']}/export?format=csv").text
        assert csv_text.splitlines()[0].startswith("prompt,answer,id,difficulty")
        assert len(csv_text.strip().splitlines()) == 21

        # Training on the embedded default: an experiment from the demo pool, evaluated on the held-out demo.
        held_out = client.post("/api/pools/demo", json={"held_out": True}).json()
        assert held_out["prompt_count"] == 180 and held_out["name"].startswith("Demo: held-out")
        settings = {"model": "tiny-random-SmolLM2", "lora_rank": 4, "num_generations": 2, "batch_size": 2,
                    "max_completion_length": 8, "max_steps": 2, "eval_pool_id": held_out["id"], "eval_every": 1,
                    "eval_samples": 4, "ood_pool_ids": [held_out["id"]], "ood_k": 2, "ood_samples": 2}
        created = client.post("/api/experiments", json={"probe_id": probe["id"], "preset": "quick_cpu",
                                                        "strategies": ["hard", "random"], "settings": settings,
                                                        "budget": {"kind": "count", "value": 4}})
        assert created.status_code == 201, created.text
        experiment_id = created.json()["id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            experiment = client.get(f"/api/experiments/{experiment_id}").json()
            if experiment["status"] not in ("queued", "running"):
                break
            time.sleep(0.5)
        assert experiment["status"] == "succeeded", (experiment, (tmp_path / "serve.log").read_text()[-3000:])
        comparison = client.get(f"/api/experiments/{experiment_id}/compare").json()
        assert [row["strategy"] for row in comparison["table"]] == ["hard", "random"]
        assert all(row["base_accuracy"] is not None and row["final_accuracy"] is not None
                   for row in comparison["table"])
        assert client.get(f"/api/runs/{experiment['runs'][0]['id']}/adapter").status_code == 200
    finally:
        children = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True,
                                  check=False).stdout.split()
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    # Stopping serve stops its local worker too (no orphaned worker left consuming the broker).
    assert children, "serve should have started a local worker process"
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{pid}") for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in children), "the local worker outlived serve"

    # A later start does not mint a second admin token; the CLI works on the same embedded database
    # (pool 3: after the demo pool and its held-out companion).
    again = subprocess.run([sys.executable, "-m", "backend.cli", "demo"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "Admin token" not in again.stdout and "Created demo pool 3" in again.stdout


# --- the local worker: race-free start, supervised (issue 7 §1) ------------------------------------------

TINY_POOL = b'{"prompt": "What is 2 + 3?", "answer": "5"}\n{"prompt": "What is 4 + 4?", "answer": "8"}\n'


class Serve:
    """`budgetlab serve` on a fresh embedded data directory, with a known admin token."""

    def __init__(self, tmp_path, name: str, artifacts):
        self.port = _free_port()
        self.log_path = tmp_path / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
        env.update(BUDGETLAB_DATA_DIR=str(tmp_path / name), BUDGETLAB_PORT=str(self.port),
                   BUDGETLAB_ADMIN_TOKEN="embedded-" + name, BUDGETLAB_ARTIFACT_DIR=str(artifacts),
                   BUDGETLAB_WORKER_BEAT_SECONDS="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "serve"], cwd=ROOT, env=env,
                                     stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60,
                                   headers={"Authorization": f"Bearer embedded-{name}"})

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_until_answering(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                if self.client.get("/api/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"serve did not answer in {timeout}s:\n{self.log()}")

    def probe_tiny_pool(self) -> dict:
        pool = self.client.post("/api/pools", files={"file": ("tiny.jsonl", TINY_POOL)})
        assert pool.status_code == 201, pool.text
        probe = self.client.post("/api/probes", json={"pool_id": pool.json()["id"], "model": "tiny-random-SmolLM2",
                                                      "k": 2, "max_new_tokens": 2})
        assert probe.status_code == 202, probe.text
        return probe.json()

    def wait_for_job(self, job_id: int, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.client.get(f"/api/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} still {job['status']} after {timeout}s:\n{self.log()[-4000:]}")

    def worker_pids(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True, check=False)
        return [int(pid) for pid in out.stdout.split()]

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def test_a_killed_local_worker_is_restarted_and_a_later_probe_finishes(tmp_path):
    serve = Serve(tmp_path, "killed", tmp_path / "artifacts")
    try:
        serve.wait_until_answering()
        deadline = time.monotonic() + 60
        while serve.client.get("/api/health").json()["workers"]["alive"] < 1:
            assert time.monotonic() < deadline, serve.log()
            time.sleep(0.2)
        [first] = serve.worker_pids()
        os.kill(first, signal.SIGKILL)

        job = serve.wait_for_job(serve.probe_tiny_pool()["job_id"])
        assert job["status"] == "succeeded", (job, serve.log()[-4000:])
        assert f"The local worker (pid {first}) killed by SIGKILL; restarting it" in serve.log()
        assert serve.worker_pids() and first not in serve.worker_pids()
    finally:
        serve.stop()


STARTS = 20


def test_start_and_probe_at_once_stays_green(tmp_path):
    """The probe is published the moment the API answers, while the worker is still declaring its
    queues on the same fresh SQLite broker: the race that used to kill the worker at start."""
    for start in range(STARTS):
        serve = Serve(tmp_path, f"start{start}", tmp_path / "artifacts")
        try:
            serve.wait_until_answering()
            job = serve.wait_for_job(serve.probe_tiny_pool()["job_id"])
            assert job["status"] == "succeeded", (start, job, serve.log()[-4000:])
            assert "Unrecoverable error" not in serve.log() and "restarting it" not in serve.log(), serve.log()
        finally:
            serve.stop()
