"""The probe through a real Celery worker process (Redis broker, Postgres ledger)."""

import time

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
    from worker.celery_app import PROBE_SHARD_TASK, enqueue

    probe_id, job_id = make_probe(make_pool(5), shard_size=2, k=2, max_new_tokens=8)
    for shard_index in range(3):
        enqueue(PROBE_SHARD_TASK, probe_id, shard_index)
    job = wait_for_status(job_id)
    assert job.status == "succeeded", (job.error, job.message)
    assert counts(probe_id) == (5 * 2, 5)
    assert job.progress_done == job.progress_total == 5

    # Delivered again (e.g. a redelivered message): skipped, nothing counted twice.
    enqueue(PROBE_SHARD_TASK, probe_id, 1)
    time.sleep(3)
    assert counts(probe_id) == (10, 5)
    assert [s for s, _ in event_reasons(job_id)] == ["queued", "running", "succeeded"]


def test_task_failure_is_recorded(service_tiny_model, worker):
    from worker.celery_app import PROBE_SHARD_TASK, enqueue

    probe_id, job_id = make_probe(make_pool(2), shard_size=2)
    enqueue(PROBE_SHARD_TASK, probe_id, 7)  # no such shard: a final error, not retried
    job = wait_for_status(job_id, timeout=60)
    assert job.status == "failed" and "has no shard 7" in job.error


def test_retry_delay_grows_and_is_capped():
    from worker.tasks import PROBE_RETRY_MAX_SECONDS, retry_delay

    delays = [retry_delay(n, base=10) for n in range(3)]
    assert 8 <= delays[0] <= 12 and 16 <= delays[1] <= 24 and 32 <= delays[2] <= 48
    assert retry_delay(20) <= PROBE_RETRY_MAX_SECONDS * 1.2


def test_task_is_registered_on_the_app():
    from worker.celery_app import PROBE_SHARD_TASK, get_celery
    from worker.tasks import probe_shard

    app = get_celery()
    assert probe_shard.name == PROBE_SHARD_TASK
    assert PROBE_SHARD_TASK in app.tasks
    assert app.conf.task_routes[PROBE_SHARD_TASK]["queue"] == "gpu"
