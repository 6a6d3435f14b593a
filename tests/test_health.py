"""/api/health says whether a worker is alive and how much work waits (issue 7 §1), on a database and
broker prefix of its own so no other test's worker or tasks count."""

import time
import uuid

import pytest

from tests.conftest import clear_caches, client_on, create_pg_database, drop_pg_database, start_worker, stop_worker


@pytest.fixture
def own_services(app, service_env, monkeypatch):
    name, url = create_pg_database()
    env = {**service_env, "DATABASE_URL": url, "BUDGETLAB_BROKER_PREFIX": f"health-{uuid.uuid4().hex[:8]}:",
           "BUDGETLAB_WORKER_BEAT_SECONDS": "0.5"}
    try:
        with client_on(app, monkeypatch, env) as client:
            yield client, env
    finally:
        drop_pg_database(name)


def _wait_for(client, predicate, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = client.get("/api/health").json()
        if predicate(health):
            return health
        time.sleep(0.2)
    raise AssertionError(f"health never matched: {health}")


def test_health_reports_workers_and_queue_depth(own_services, tmp_path):
    client, env = own_services
    health = client.get("/api/health", headers={"Authorization": ""}).json()  # public
    assert health["status"] == "degraded" and health["workers"]["alive"] == 0
    assert "jobs will wait until a worker runs" in health["message"]
    assert health["broker"] == {"reachable": True, "queue_depth": {"cpu": 0, "gpu": 0}, "error": None}

    pool = client.post("/api/pools", files={"file": ("t.jsonl", b'{"prompt": "1+1?", "answer": "2"}\n')}).json()
    probe = client.post("/api/probes", json={"pool_id": pool["id"], "model": "tiny-random-SmolLM2", "k": 1,
                                             "max_new_tokens": 1}).json()
    health = client.get("/api/health").json()
    assert health["broker"]["queue_depth"]["gpu"] == 1 and "(1 task waiting)" in health["message"]

    worker = start_worker(env, tmp_path / "worker.log")
    try:
        health = _wait_for(client, lambda h: h["workers"]["alive"] == 1)
        assert health["status"] == "ok" and health["message"] is None and health["workers"]["queues"] == ["cpu", "gpu"]
        deadline = time.monotonic() + 300
        while client.get(f"/api/jobs/{probe['job_id']}").json()["status"] != "succeeded":
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.3)
        assert client.get("/api/health").json()["broker"]["queue_depth"] == {"cpu": 0, "gpu": 0}
    finally:
        stop_worker(worker)
    # A clean shutdown says goodbye at once.
    assert client.get("/api/health").json()["workers"]["alive"] == 0


def test_a_killed_worker_stops_counting_after_three_beats(own_services, tmp_path):
    client, env = own_services
    worker = start_worker(env, tmp_path / "worker.log")
    _wait_for(client, lambda h: h["workers"]["alive"] == 1)
    worker.kill()
    worker.wait()
    health = _wait_for(client, lambda h: h["workers"]["alive"] == 0, timeout=10)
    assert health["status"] == "degraded"


def test_an_unreachable_broker_is_reported_not_raised(own_services, monkeypatch):
    client, _env = own_services
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens on port 1
    clear_caches()
    health = client.get("/api/health").json()
    assert health["broker"]["reachable"] is False and "cannot be reached" in health["broker"]["error"]
    assert "127.0.0.1:1" not in str(health)  # the broker's address stays in the log, not the public answer
    assert health["status"] == "degraded"
