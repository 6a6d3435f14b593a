"""Celery task for labeling jobs (push, pull, re-grade): a thin wrapper over
``backend.labels.jobs.run_label_job`` (queue "cpu": no model is loaded)."""

from __future__ import annotations

import logging

from celery import shared_task

from backend.labels.jobs import LABEL_JOB_TASK

log = logging.getLogger(__name__)


@shared_task(name=LABEL_JOB_TASK, acks_late=True)
def label_job_task(job_id: int) -> str:
    from backend.labels.jobs import run_label_job

    outcome = run_label_job(job_id)
    log.info("label job %s: %s", job_id, outcome)
    return outcome
