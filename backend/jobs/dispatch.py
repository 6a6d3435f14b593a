"""The outbox: a job's tasks are written in the same transaction as the job, and sent after the commit.

Nothing is lost between the two: a task whose sending failed (the broker down, the API killed) stays
unsent in `job_task`, and the reconciler sends it later. Sending twice is harmless: a worker claims a task
only once (backend.jobs.engine.claim).
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, select

from backend.jobs import broker
from backend.jobs.kinds import JobKind, get_kind
from backend.jobs.tables import FINISHED, Job, JobTask
from backend.timeutil import utcnow

log = logging.getLogger(__name__)

# Test hook for the fault test of dispatch: the process dies right after the commit, before any send.
FAULT_ENV = "BUDGETLAB_FAULT"
KILL_BEFORE_DISPATCH = "kill-before-dispatch"


def add_task(session: Session, kind: JobKind, job: Job, label: str, args: dict[str, Any]) -> JobTask:
    """A task of `job`, unsent, with time limits sized by its kind; the caller's commit writes both."""
    soft, hard = kind.time_limits(session, job, args)
    task = JobTask(job_id=job.id, label=label, args=args, soft_limit_seconds=soft, hard_limit_seconds=max(hard, soft))
    session.add(task)
    session.flush()
    return task


def commit_and_send(session: Session, job_ids: list[int]) -> list[str]:
    """Commit, then send the unsent tasks of these jobs. Returns the problems met; a task that could not be
    sent stays in the outbox (its job's message says why) and the reconciler sends it once the broker is back."""
    session.commit()
    if os.environ.get(FAULT_ENV) == KILL_BEFORE_DISPATCH:
        os.kill(os.getpid(), signal.SIGKILL)
    return send_unsent(session, job_ids=job_ids)


def send_unsent(session: Session, *, job_ids: list[int] | None = None, created_before=None) -> list[str]:
    """Send the outbox's tasks (of `job_ids`, or all created before `created_before`), committing each as sent."""
    query = select(JobTask.id, JobTask.job_id).join(Job, Job.id == JobTask.job_id).where(
        JobTask.sent_at.is_(None), JobTask.completed_at.is_(None), Job.status.not_in([s.value for s in FINISHED]))
    if job_ids is not None:
        query = query.where(JobTask.job_id.in_(job_ids))
    if created_before is not None:
        query = query.where(JobTask.created_at < created_before)
    problems = []
    for task_id, job_id in session.exec(query.order_by(JobTask.id)).all():
        problem = send_task(session, task_id)
        if problem:
            problems.append(problem)
            _note_waiting(session, job_id, problem)
            break  # the broker is down: the rest would fail the same way
    return problems


def send_task(session: Session, task_id: int) -> str | None:
    """Send one task and mark it sent (committed). A problem in words instead of an exception."""
    task = session.get(JobTask, task_id)
    kind = get_kind(session.get(Job, task.job_id).kind)
    session.commit()  # no transaction (on SQLite: no write lock) stays open while the broker is called
    try:
        broker.send(kind.task_name, kind.queue, task.id, soft_limit=task.soft_limit_seconds,
                    hard_limit=task.hard_limit_seconds)
    except Exception as exc:  # broker unreachable: the task waits in the outbox
        log.warning("could not send job task %s: %s", task_id, exc)
        session.rollback()
        return f"the task broker could not be reached ({type(exc).__name__})"
    session.execute(update(JobTask).where(JobTask.id == task_id)
                    .values(sent_at=utcnow(), sends=JobTask.sends + 1))
    session.commit()
    return None


def _note_waiting(session: Session, job_id: int, problem: str) -> None:
    job = session.get(Job, job_id)
    job.message = (f"waiting: {problem}; it is sent when the broker is back (check that it runs, "
                   "and CELERY_BROKER_URL)")[:1000]
    session.add(job)
    session.commit()
