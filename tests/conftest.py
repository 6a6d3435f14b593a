"""Shared fixtures: a fresh Postgres database and Redis db per session, the app, a real Celery worker.

Every test session creates its own database (dropped at the end) and flushes its own Redis db, so
nothing depends on what an earlier run left behind.
"""

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import redis

import backend.job_kinds  # noqa: F401  (registers every job kind, as the API and the workers do)

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ROOT / "tests" / "data"  # small slices of public datasets, see tests/data/README.md
PG_ADMIN = os.environ.get("BUDGETLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_TEST_URL = os.environ.get("BUDGETLAB_TEST_REDIS", "redis://127.0.0.1:6379/11")
# Each session's broker keys carry their own prefix, so concurrent sessions never share tasks.
BROKER_PREFIX = f"budgetlab-test-{uuid.uuid4().hex[:8]}:"
ADMIN_TOKEN = "test-admin-token-" + uuid.uuid4().hex[:8]
ADMIN_PASSWORD = "test-admin-password-" + uuid.uuid4().hex[:8]  # the user "admin", for the browser


def clear_caches() -> None:
    """Settings, engine and Celery app are cached per process; tests that change the env reset them."""
    from backend.database import get_engine
    from backend.jobs.broker import get_celery
    from backend.settings import get_settings

    if get_engine.cache_info().currsize:
        get_engine().dispose()
    for cached in (get_settings, get_engine, get_celery):
        cached.cache_clear()


def create_pg_database() -> tuple[str, str]:
    name = f"budgetlab_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0]
    return name, f"{base}/{name}"


def drop_pg_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def upgrade_head(url: str) -> None:
    from backend.migrate import upgrade_head as upgrade

    upgrade(url)


@pytest.fixture(scope="session")
def service_env(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Environment for the whole session: Postgres + Redis, migrated with Alembic."""
    name, url = create_pg_database()
    data_dir = tmp_path_factory.mktemp("data")
    env = {
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": REDIS_TEST_URL,
        "BUDGETLAB_BROKER_PREFIX": BROKER_PREFIX,
        "BUDGETLAB_DATA_DIR": str(data_dir),
        "BUDGETLAB_ARTIFACT_DIR": str(os.environ.get("BUDGETLAB_TEST_ARTIFACTS", data_dir / "artifacts")),
        "BUDGETLAB_ADMIN_TOKEN": ADMIN_TOKEN,
        # Tests send many bad credentials on purpose from one address; the limit has a test of its own.
        "BUDGETLAB_AUTH_FAILURES_ALLOWED": "100000",
        # Tests build checkpoints in pytest's temporary directories and probe them by path.
        "BUDGETLAB_MODELS_DIR": str(tmp_path_factory.getbasetemp()),
        # Jobs no worker runs stay queued in the session's database; quotas have a test of their own.
        "BUDGETLAB_QUOTA_ACTIVE_JOBS": "100000",
        "BUDGETLAB_QUOTA_QUEUED_TOKENS": str(10**15),
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    clear_caches()
    upgrade_head(url)
    yield env
    clear_caches()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    drop_pg_database(name)
    broker = redis.Redis.from_url(REDIS_TEST_URL)
    for key in broker.scan_iter(f"{BROKER_PREFIX}*"):
        broker.delete(key)


@pytest.fixture(scope="session")
def app(service_env):
    from backend.app import create_app
    from backend.auth.service import ensure_first_admin
    from backend.database import session_scope

    with session_scope() as session:
        ensure_first_admin(session, ADMIN_TOKEN, ADMIN_PASSWORD)
    return create_app()


@pytest.fixture
def own_database(service_env, monkeypatch) -> Iterator[dict[str, str]]:
    """A fresh, migrated Postgres database and a broker key prefix for this test alone (set in the environment,
    and returned to pass to its processes): for tests that run the reconciler, whose passes act on every job of
    their database and send tasks by id (the session's database holds other tests' unsent jobs)."""
    name, url = create_pg_database()
    env = {"DATABASE_URL": url, "BUDGETLAB_BROKER_PREFIX": f"own-{uuid.uuid4().hex[:8]}:"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clear_caches()
    upgrade_head(url)
    yield env
    monkeypatch.undo()
    clear_caches()
    drop_pg_database(name)


@pytest.fixture
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as test_client:
        test_client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        yield test_client


@contextmanager
def client_on(app, monkeypatch, env: dict[str, str]):
    """A client of `app` with these settings on top of the session's, on env["DATABASE_URL"] (migrated
    here, with the admin token); the settings are restored after."""
    from fastapi.testclient import TestClient

    from backend.auth.service import ensure_first_admin
    from backend.database import session_scope

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clear_caches()
    try:
        upgrade_head(env["DATABASE_URL"])
        with session_scope() as session:
            ensure_first_admin(session, ADMIN_TOKEN, ADMIN_PASSWORD)
        with TestClient(app) as client:
            client.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
            yield client
    finally:
        monkeypatch.undo()
        clear_caches()


def app_with(**env: str):
    """An app built under these settings on top of the session's (those read when the app is built: the limit on
    bad credentials, the docs behind sign-in); the settings are restored after."""
    from backend.app import create_app

    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        clear_caches()
        built = create_app()
    clear_caches()
    return built


@pytest.fixture(params=["postgres", "sqlite"])
def any_client(request, app, client, tmp_path, monkeypatch):
    """A client on the session's Postgres database, or on a fresh embedded SQLite file."""
    if request.param == "postgres":
        yield client
        return
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'budgetlab.db'}", "BUDGETLAB_DATA_DIR": str(tmp_path)}
    with client_on(app, monkeypatch, env) as sqlite_client:
        yield sqlite_client


@pytest.fixture
def db_session(service_env):
    """A session whose work is rolled back after the test."""
    from sqlmodel import Session

    from backend.database import get_engine

    connection = get_engine().connect()
    transaction = connection.begin()
    session = Session(bind=connection, join_transaction_mode="create_savepoint")
    yield session
    session.close()
    transaction.rollback()
    connection.close()


def start_worker(env: dict[str, str], log_path: Path, queues: str = "cpu,gpu") -> subprocess.Popen:
    """A real Celery worker process consuming both queues, as `budgetlab worker` runs it."""
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "worker.main", "worker", "-Q", queues, "--pool=solo",
         "--concurrency=1", "--loglevel=INFO", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited early:\n{log_path.read_text()}")
        if "ready." in log_path.read_text():
            return proc
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"worker did not become ready:\n{log_path.read_text()}")


def stop_worker(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def worker(service_env, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    proc = start_worker(service_env, log_path)
    yield proc
    stop_worker(proc)


def wait_for_job(client, job_id: int, timeout: float = 600, until=("succeeded", "failed", "cancelled")) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/api/jobs/{job_id}").json()
        if job["status"] in until:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not reach {until} in {timeout}s: {job}")
