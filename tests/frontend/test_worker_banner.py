"""The pages say so when no worker is alive (issue 7 §1): a server on a database and broker prefix of
its own, first with no worker (banner), then with a real Celery worker (no banner)."""

import os
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from tests.conftest import (
    ADMIN_PASSWORD,
    ADMIN_TOKEN,
    ROOT,
    create_pg_database,
    drop_pg_database,
    start_worker,
    stop_worker,
    upgrade_head,
)
from tests.frontend.conftest import free_port, needs_chromium, sign_in

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import expect

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def own_env(service_env):
    from sqlmodel import Session

    from backend.auth.service import ensure_first_admin
    from backend.database import make_engine

    name, url = create_pg_database()
    upgrade_head(url)
    engine = make_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as session:
        ensure_first_admin(session, ADMIN_TOKEN, ADMIN_PASSWORD)
        session.commit()
    engine.dispose()
    yield {**service_env, "DATABASE_URL": url, "BUDGETLAB_BROKER_PREFIX": f"banner-{uuid.uuid4().hex[:8]}:",
           "BUDGETLAB_WORKER_BEAT_SECONDS": "0.5"}
    drop_pg_database(name)


@pytest.fixture(scope="module")
def server(own_env, tmp_path_factory):
    """Overrides the package's server: this one has no worker unless the test starts one."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("banner") / "uvicorn.log"
    env = {**os.environ, **own_env}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "backend.app:create_app", "--factory", "--host",
                             "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log_path.read_text()
        try:
            with urllib.request.urlopen(f"{base}/api/health", timeout=2):
                break
        except OSError:
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
    yield base
    proc.terminate()
    proc.wait(timeout=15)


def test_banner_while_no_worker_is_alive(page, server, own_env, tmp_path):
    sign_in(page, server)
    banner = page.locator("[data-testid=worker-banner]")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("jobs will wait until a worker runs")

    worker = start_worker(own_env, tmp_path / "worker.log")
    try:
        page.reload()  # the banner polls every 10 s; a reload asks at once
        expect(banner).to_be_hidden(timeout=15_000)
    finally:
        stop_worker(worker)
    page.reload()
    expect(banner).to_be_visible(timeout=15_000)
    assert page.problems == []
