"""Browser-test fixtures: a real uvicorn server, Debian's chromium through Playwright, a page that
records JS errors, and helpers shared by the browser tests (sign in, create a demo pool, probe it)."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_TOKEN, ROOT

try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:  # the browser tests skip themselves (pytest.importorskip in each module)
    Page = expect = sync_playwright = None

CHROMIUM = os.environ.get("BUDGETLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
TINY_MODEL = "tiny-random-SmolLM2"
PROBE_TIMEOUT_MS = 300_000

# Each browser test module marks itself with this.
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists() and shutil.which("chromium") is None,
                                    reason="chromium is not installed (apt-get install -y chromium)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(service_env, tmp_path_factory) -> Iterator[str]:
    """uvicorn serving the real app on a free port, with the session's Postgres + Redis.

    Tests that run a probe also ask for the `worker` fixture (a real Celery worker)."""
    from backend.auth.service import ensure_first_admin
    from backend.database import session_scope

    with session_scope() as session:
        ensure_first_admin(session, ADMIN_TOKEN, ADMIN_PASSWORD)

    port = free_port()
    env = {**os.environ, **service_env}
    env.pop("BUDGETLAB_MODELS", None)
    log_path = tmp_path_factory.mktemp("uvicorn") / "uvicorn.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "backend.app:create_app", "--factory", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited early:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{base}/api/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"uvicorn did not start:\n{log_path.read_text()}")
        time.sleep(0.2)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, server) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, accept_downloads=True)
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.problems = []  # JS exceptions, console errors, dialogs: none should happen
    page.on("pageerror", lambda exc: page.problems.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: page.problems.append(f"console.{msg.type}: {msg.text}")
            if msg.type == "error" else None)

    def on_dialog(dialog):
        if dialog.type == "confirm":  # our own "delete pool?" confirmation
            dialog.accept()
        else:
            page.problems.append(f"dialog {dialog.type}: {dialog.message}")
            dialog.dismiss()

    page.on("dialog", on_dialog)
    yield page
    context.close()


def sign_in(page: Page, server: str, name: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    page.goto(f"{server}/#/signin")
    page.fill("#signin-name", name)
    page.fill("#signin-password", password)
    page.click("#signin-button")
    page.wait_for_url("**/#/pools")
    expect(page.locator("#auth-state")).to_contain_text(name)


def create_demo_pool(page: Page, button: str = "#demo-button") -> dict:
    """Click a demo-pool button on the pools page; returns the created pool."""
    with page.expect_response(lambda r: r.url.endswith("/api/pools/demo") and r.request.method == "POST") as created:
        page.click(button)
    assert created.value.status == 201, created.value.text()
    pool = created.value.json()
    expect(page.locator(f"[data-testid=pool-link-{pool['id']}]")).to_be_visible()
    return pool


def probe_pool(page: Page, pool: dict, k: int = 4, max_new_tokens: int = 16) -> dict:
    """Open the pool, probe it with the tiny model through the worker, wait until it succeeded."""
    page.click(f"[data-testid=pool-link-{pool['id']}]")
    page.wait_for_url(f"**/#/pools/{pool['id']}")
    page.select_option("#probe-model", TINY_MODEL)
    page.fill("#probe-k", str(k))
    page.fill("#probe-max-new-tokens", str(max_new_tokens))
    with page.expect_response(lambda r: r.url.endswith("/api/probes") and r.request.method == "POST") as started:
        page.click("#probe-submit")
    assert started.value.status == 202, started.value.text()
    expect(page.locator("#job-state")).to_have_attribute("data-status", "succeeded", timeout=PROBE_TIMEOUT_MS)
    return started.value.json()


def api_get(page: Page, server: str, path: str):
    """A JSON GET with the admin token, outside the page (to check what the server holds)."""
    response = page.request.get(f"{server}{path}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert response.ok, f"GET {path}: {response.status} {response.text()}"
    return response.json()
