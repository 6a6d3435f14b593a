"""A worker lost mid-run: the run ends failed with that reason and keeps its metrics, never running for ever."""

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert
from sqlmodel import select

from backend.database import session_scope
from backend.jobs.service import lock_job, transition
from backend.jobs.tables import JobStatus
from backend.runs.service import create_run
from backend.runs.tables import Run, RunMetric
from backend.timeutil import utcnow
from tests.conftest import start_worker
from tests.runs.conftest import make_subset
from tests.worker.model_fixtures import TINY_MODEL

TINY = {"model": TINY_MODEL, "lora_rank": 4, "lora_alpha": 8, "num_generations": 2, "batch_size": 2,
        "max_completion_length": 8, "learning_rate": 1e-3}


def running_run(steps_logged: int, heartbeat_age: timedelta) -> tuple[int, int]:
    """A run whose job is running, as a worker left it, with some steps logged."""
    with session_scope() as session:
        run = create_run(session, make_subset(), {**TINY, "max_steps": 10})
        job = lock_job(session, run.job_id)
        transition(session, job, JobStatus.running, "training started")
        job.heartbeat_at = utcnow() - heartbeat_age
        session.execute(insert(RunMetric), [{"run_id": run.id, "step": s, "key": "loss", "value": 0.5}
                                            for s in range(1, steps_logged + 1)])
        return run.id, run.job_id


def logged_steps(run_id: int) -> int:
    with session_scope() as session:
        return len(session.exec(select(RunMetric).where(RunMetric.run_id == run_id)).all())


def test_a_run_delivered_again_after_its_worker_died_fails_and_keeps_its_metrics(service_env):
    from worker.training import train_run

    run_id, job_id = running_run(3, heartbeat_age=timedelta(hours=1))
    assert train_run(run_id) == "failed"  # what a redelivered task does: never retrain over the old metrics
    with session_scope() as session:
        job = lock_job(session, job_id)
        assert job.status == "failed" and "lost after step 3 of 10" in job.error
        assert "metrics it logged are kept" in job.error
    assert logged_steps(run_id) == 3


def test_a_run_still_beating_is_left_to_its_worker(service_env):
    from worker.training import train_run

    run_id, job_id = running_run(2, heartbeat_age=timedelta(seconds=1))
    assert train_run(run_id) == "running"  # a duplicate delivery while the first worker trains it
    with session_scope() as session:
        assert lock_job(session, job_id).status == "running"
    assert logged_steps(run_id) == 2


def test_a_retry_restarts_a_job_its_requeue_missed(service_env, service_tiny_model):
    from worker.training import train_run

    run_id, job_id = running_run(3, heartbeat_age=timedelta(hours=1))
    with session_scope() as session:  # a short run: 2 steps
        run = session.get(Run, run_id)
        run.settings = {**run.settings, "max_steps": 2}
    assert train_run(run_id, retrying=True) == "succeeded"
    with session_scope() as session:
        assert set(session.exec(select(RunMetric.step).where(RunMetric.run_id == run_id)).all()) == {1, 2}


def test_a_killed_worker_is_noticed_by_its_silent_heartbeat(client, service_env, service_tiny_model, monkeypatch,
                                                            tmp_path):
    from backend.settings import get_settings
    from worker.celery_app import get_celery
    from worker.training_task import TRAIN_TASK

    monkeypatch.setenv("BUDGETLAB_WORKER_LOST_SECONDS", "4")  # the API's patience, for this test
    get_settings.cache_clear()
    with session_scope() as session:
        run = create_run(session, make_subset(), {**TINY, "max_steps": 500})
        run_id, job_id = run.id, run.job_id
    # A worker of its own on a queue of its own, beating every 0.5 s; SIGKILL leaves no chance to clean up.
    queue = f"lost-{run_id}"
    proc = start_worker({**service_env, "BUDGETLAB_HEARTBEAT_SECONDS": "0.5"}, tmp_path / "worker.log",
                        queues=queue)
    try:
        get_celery().send_task(TRAIN_TASK, args=[run_id], queue=queue)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            series = client.get(f"/api/runs/{run_id}/metrics?keys=loss").json()["series"]
            if series.get("loss", {}).get("steps"):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"no step logged:\n{Path(tmp_path / 'worker.log').read_text()[-3000:]}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert client.get(f"/api/runs/{run_id}").json()["job"]["status"] == "running"  # not yet: heartbeat fresh
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            job = client.get(f"/api/runs/{run_id}").json()["job"]
            if job["status"] != "running":
                break
            time.sleep(0.5)
        assert job["status"] == "failed", job
        assert "worker training this run was lost after step" in job["error"]
        logged = client.get(f"/api/runs/{run_id}/metrics?keys=loss").json()["series"]["loss"]["steps"]
        assert len(logged) >= 1
        assert client.get(f"/api/jobs/{job_id}").json()["status"] == "failed"
    finally:
        if proc.poll() is None:
            proc.kill()
        get_settings.cache_clear()


@pytest.mark.parametrize("silent_for, expected", [(0.2, "failed"), (3600, "running")])
def test_only_silent_training_jobs_are_failed(service_env, silent_for, expected):
    from backend.jobs.service import fail_lost_jobs

    with session_scope() as session:
        run = create_run(session, make_subset(), {**TINY, "max_steps": 5})
        job = lock_job(session, run.job_id)
        transition(session, job, JobStatus.running, "training started")
        job_id = job.id
    time.sleep(0.3)
    with session_scope() as session:
        fail_lost_jobs(session, "train", timedelta(seconds=silent_for), lambda job: "lost")
        assert lock_job(session, job_id).status == expected
        fail_lost_jobs(session, "probe", timedelta(seconds=0), lambda job: "lost")  # other kinds untouched
        assert lock_job(session, job_id).status == expected
