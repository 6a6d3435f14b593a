"""The probe through a real Celery worker process (Redis broker, Postgres ledger)."""

import time

from sqlmodel import select

from tests.worker.test_probing import counts, event_reasons, job_of, make_pool, make_probe


def wait_for_status(job_id: int, timeout: float = 180, until=("succeeded", "failed", "cancelled")):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = job_of(job_id)
        if job.status in until:
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} is still {job.status} after {timeout}s: {job.message}")


def test_probe_shards_through_the_worker(service_tiny_model, worker):
    from backend.database import session_scope
    from backend.jobs.dispatch import commit_and_send, send_task
    from backend.jobs.tables import JobTask

    probe_id, job_id = make_probe(make_pool(5), shard_size=2, k=2, max_new_tokens=8)
    with session_scope() as session:
        assert commit_and_send(session, [job_id]) == []
    job = wait_for_status(job_id)
    assert job.status == "succeeded", (job.error, job.message)
    assert counts(probe_id) == (5 * 2, 5)
    assert job.progress_done == job.progress_total == 5

    # Delivered again (e.g. a redelivered message): skipped, nothing counted twice.
    with session_scope() as session:
        tasks = session.exec(select(JobTask).where(JobTask.job_id == job_id).order_by(JobTask.id)).all()
        assert [t.sends for t in tasks] == [1, 1, 1] and all(t.completed_at and t.claims == 1 for t in tasks)
        assert send_task(session, tasks[1].id) is None
    time.sleep(3)
    assert counts(probe_id) == (10, 5)
    assert [s for s, _ in event_reasons(job_id)] == ["queued", "running", "succeeded"]


def test_every_kind_has_its_task_on_the_worker_app():
    import backend.job_kinds  # noqa: F401
    import worker.tasks  # noqa: F401
    from backend.jobs.broker import get_celery
    from backend.jobs.kinds import all_kinds

    app = get_celery()
    names = {kind.task_name for kind in all_kinds()}
    assert {"budgetlab.probe_shard", "budgetlab.train_run", "budgetlab.label_pull"} <= names
    assert names <= set(app.tasks)


def test_retry_delay_grows_and_is_capped():
    from backend.jobs.engine import RETRY_MAX_SECONDS, retry_delay

    delays = [retry_delay(n, base=10) for n in range(3)]
    assert 8 <= delays[0] <= 12 and 16 <= delays[1] <= 24 and 32 <= delays[2] <= 48
    assert retry_delay(20) <= RETRY_MAX_SECONDS * 1.2
