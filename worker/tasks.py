"""Celery tasks: thin wrappers over plain functions. Registered with ``shared_task`` so they attach
to whichever Budgetlab Celery app is current (the worker's, or a test's fresh one)."""

from __future__ import annotations

import logging
import random

from celery import shared_task

from worker.celery_app import PROBE_SHARD_TASK

log = logging.getLogger(__name__)

PROBE_MAX_RETRIES = 3
PROBE_RETRY_BASE_SECONDS = 10
PROBE_RETRY_MAX_SECONDS = 600


def retry_delay(retries_so_far: int, base: float = PROBE_RETRY_BASE_SECONDS) -> float:
    """Exponential backoff with jitter: ~10 s, 20 s, 40 s, ... capped at 10 minutes."""
    delay = min(PROBE_RETRY_MAX_SECONDS, base * 2 ** retries_so_far)
    return delay * random.uniform(0.8, 1.2)


@shared_task(name=PROBE_SHARD_TASK, bind=True, max_retries=PROBE_MAX_RETRIES, acks_late=True)
def probe_shard(self, probe_id: int, shard_index: int) -> str:
    """Probe one shard (queue "gpu"). Transient errors are retried with exponential backoff, up
    to PROBE_MAX_RETRIES times; then the job fails with the reason."""
    from worker.probing import TransientProbeError, fail_probe_job, run_probe_shard

    try:
        outcome = run_probe_shard(probe_id, shard_index)
    except TransientProbeError as exc:
        if self.request.retries >= self.max_retries:
            fail_probe_job(probe_id, f"Shard {shard_index} failed {self.request.retries + 1} times with a "
                                     f"transient error; giving up. Last error: {exc}")
            return "failed"
        delay = retry_delay(self.request.retries)
        log.warning("probe %s shard %s: %s; retry %d/%d in %.0fs", probe_id, shard_index, exc,
                    self.request.retries + 1, self.max_retries, delay)
        raise self.retry(exc=exc, countdown=delay) from exc
    log.info("probe %s shard %s: %s", probe_id, shard_index, outcome)
    return outcome
