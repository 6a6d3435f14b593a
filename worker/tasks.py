"""One Celery task per job kind, registered from backend.job_kinds: each receives a job task's id and hands
it to the engine (claim, run, finish, retry), so no kind has a lifecycle of its own here."""

from __future__ import annotations

import logging

from celery import shared_task

import backend.job_kinds  # noqa: F401  (registers every kind)
from backend.jobs.engine import RetryLater, execute, owner_name
from backend.jobs.kinds import JobKind, all_kinds

log = logging.getLogger(__name__)


def _task_for(kind: JobKind):
    @shared_task(name=kind.task_name, bind=True, acks_late=True, max_retries=None)
    def run_job_task(self, task_id: int) -> str:
        owner = owner_name(f"{self.request.id}#{self.request.retries}")
        try:
            outcome = execute(kind, task_id, owner, retries_so_far=self.request.retries)
        except RetryLater as exc:  # the engine counts the retries and fails the job when they run out
            raise self.retry(exc=exc, countdown=exc.delay) from exc
        log.info("%s task %s: %s", kind.name, task_id, outcome)
        return outcome

    return run_job_task


TASKS = {kind.name: _task_for(kind) for kind in all_kinds()}
