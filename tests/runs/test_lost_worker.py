"""A worker lost mid-run: when its lease expires the reconciler fails the run with that reason and keeps its
metrics; a duplicate delivery never trains it twice. Reads never change a job."""

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert, update
from sqlmodel import select

from backend.database import session_scope
from backend.jobs.engine import claim, execute, owner_name
from backend.jobs.reconciler import reconcile_once
from backend.jobs.service import lock_job
from backend.jobs.tables import JobTask
from backend.runs.kind import TRAIN
from backend.runs.service import create_run
from backend.runs.tables import RunMetric
from backend.timeutil import utcnow
from tests.conftest import client_on, start_worker
from tests.runs.conftest import make_subset
from tests.worker.model_fixtures import TINY_MODEL

TINY = {"model": TINY_MODEL, "lora_rank": 4, "lora_alpha": 8, "num_generations": 2, "batch_size": 2,
        "max_completion_length": 8, "learning_rate": 1e-3}


@pytest.fixture
def own_client(app, own_database, monkeypatch):
    """A client on a database of this test's own: the reconciler passes here act on every job of it."""
    with client_on(app, monkeypatch, own_database) as client:
        yield client


def running_run(steps_logged: int, delivery: str = "first") -> tuple[int, int, int]:
    """A run claimed by a worker (`delivery`), as it left it, with some steps logged."""
    with session_scope() as session:
        run = create_run(session, make_subset(), {**TINY, "max_steps": 10})
        run_id, job_id = run.id, run.job_id
        task_id = session.exec(select(JobTask.id).where(JobTask.job_id == job_id)).one()
        session.execute(insert(RunMetric), [{"run_id": run.id, "step": s, "key": "loss", "value": 0.5}
                                            for s in range(1, steps_logged + 1)])
    assert not isinstance(claim(TRAIN, task_id, owner_name(delivery)), str)
    return run_id, job_id, task_id


def expire(task_id: int) -> None:
    with session_scope() as session:
        session.execute(update(JobTask).where(JobTask.id == task_id)
                        .values(lease_expires_at=utcnow() - timedelta(seconds=1)))


def logged_steps(run_id: int) -> int:
    with session_scope() as session:
        return len(session.exec(select(RunMetric).where(RunMetric.run_id == run_id)).all())


def status(job_id: int):
    with session_scope() as session:
        return lock_job(session, job_id)


def test_an_expired_lease_fails_the_run_and_keeps_its_metrics(own_client):
    client = own_client
    run_id, job_id, task_id = running_run(3)
    assert client.get(f"/api/runs/{run_id}").json()["job"]["status"] == "running"
    expire(task_id)
    assert client.get(f"/api/jobs/{job_id}").json()["status"] == "running"  # reads never write
    done = reconcile_once()
    assert job_id in done.lost
    job = status(job_id)
    assert job.status == "failed" and "lost after step 3 of 10" in job.error
    assert "metrics it logged are kept" in job.error
    assert logged_steps(run_id) == 3
    events = client.get(f"/api/jobs/{job_id}/events").json()
    assert events[-1]["to_status"] == "failed" and "lost after step 3" in events[-1]["reason"]


def test_a_duplicate_delivery_while_the_lease_is_live_is_skipped(own_client):
    run_id, job_id, task_id = running_run(2)
    assert execute(TRAIN, task_id, owner_name("second")) == "skipped"
    assert status(job_id).status == "running" and logged_steps(run_id) == 2
    assert job_id not in reconcile_once().lost  # the lease is live: nothing to do


def test_a_redelivery_waits_for_the_lease_then_counts_the_worker_as_lost(own_client):
    run_id, job_id, task_id = running_run(3, delivery="abc#0")
    # The same message again (a Redis visibility timeout, a killed pool child): its holder may still be training.
    assert execute(TRAIN, task_id, owner_name("abc#0")) == "skipped"
    assert status(job_id).status == "running"
    expire(task_id)
    assert execute(TRAIN, task_id, owner_name("abc#0")) == "failed"  # the lease ran out: never retrain over it
    job = status(job_id)
    assert job.status == "failed" and "lost after step 3 of 10" in job.error
    assert logged_steps(run_id) == 3


def test_a_killed_training_worker_is_failed_by_the_reconciler(own_client, own_database, service_env, service_tiny_model,
                                                              tmp_path):
    client = own_client
    from backend.jobs import broker
    from backend.settings import get_settings

    with session_scope() as session:
        run = create_run(session, make_subset(), {**TINY, "max_steps": 500})
        run_id, job_id = run.id, run.job_id
    # A worker of its own on a queue of its own, whose lease lasts 4 s; SIGKILL leaves it no chance to clean up.
    queue = f"lost-{run_id}"
    proc = start_worker({**service_env, **own_database, "BUDGETLAB_LEASE_SECONDS": "4"}, tmp_path / "worker.log",
                        queues=queue)
    try:
        with session_scope() as session:
            task = session.exec(select(JobTask).where(JobTask.job_id == job_id)).one()
            broker.send(TRAIN.task_name, queue, task.id, soft_limit=600, hard_limit=900)
            task.sent_at = utcnow()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not logged_steps(run_id):
            time.sleep(0.2)
        assert logged_steps(run_id), Path(tmp_path / "worker.log").read_text()[-3000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        killed = time.monotonic()
        deadline = killed + 60
        while time.monotonic() < deadline and status(job_id).status == "running":
            reconcile_once()  # what `budgetlab reconcile` (or serve) does every few seconds
            time.sleep(0.5)
        job = client.get(f"/api/runs/{run_id}").json()["job"]
        assert job["status"] == "failed", job
        assert "worker training this run was lost after step" in job["error"]
        assert time.monotonic() - killed < 4 + 10  # the lease, plus a pass
        assert len(client.get(f"/api/runs/{run_id}/metrics?keys=loss").json()["series"]["loss"]["steps"]) >= 1
    finally:
        if proc.poll() is None:
            proc.kill()
        get_settings.cache_clear()
