"""Celery task for training: a thin wrapper over ``worker.training.train_run`` (queue "gpu")."""

from __future__ import annotations

import logging

from celery import shared_task

from worker.tasks import retry_delay

log = logging.getLogger(__name__)

TRAIN_TASK = "budgetlab.train_run"
TRAIN_MAX_RETRIES = 2


@shared_task(name=TRAIN_TASK, bind=True, max_retries=TRAIN_MAX_RETRIES, acks_late=True)
def train_run_task(self, run_id: int) -> str:
    """Train one run. A transient error (the database lost) restarts it with backoff,
    up to TRAIN_MAX_RETRIES times; then the job fails with the reason."""
    from worker.training import TransientTrainingError, fail_run_job, train_run

    try:
        outcome = train_run(run_id, raise_transient=self.request.retries < self.max_retries,
                            retrying=self.request.retries > 0)
    except TransientTrainingError as exc:
        delay = retry_delay(self.request.retries)
        log.warning("run %s: %s; retry %d/%d in %.0fs", run_id, exc, self.request.retries + 1, self.max_retries,
                    delay)
        raise self.retry(exc=exc, countdown=delay) from exc
    except Exception as exc:  # never leave the job running
        fail_run_job(run_id, f"Training failed: {exc}")
        raise
    log.info("run %s: %s", run_id, outcome)
    return outcome
