"""The job engine: how any kind's task is claimed, kept alive, stopped, finished, failed and retried.

A worker receives a task id. `execute` claims the task (a lease in `job_task`, held by this delivery), runs
the kind's function with a `TaskContext`, and turns what happens into the job's status through
`backend.jobs.service.transition`:

- the run function calls `ctx.beat(...)` after each batch or step: it writes progress, renews the lease and
  says whether to go on (False: cancel requested, the job ended elsewhere, or the lease went to another
  worker); past the task's soft time limit it raises `TimeLimitExceeded`;
- it finishes with `ctx.complete(session)` in the transaction that writes its results; the last task of a
  job to complete gets the job back and calls `ctx.succeed`;
- `JobFailure` fails the job with its message as is; a transient error (the database went away, and for
  kinds that allow it a GPU out of memory) is retried with backoff, up to MAX_RETRIES; anything else fails
  the job in words, with the traceback in the worker log.

Lock order, everywhere: the job row, then its task rows.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import func, update
from sqlmodel import Session, select

from backend.database import session_scope
from backend.jobs.kinds import JobKind, get_kind
from backend.jobs.service import fail_unless_finished, lock_job, record_event, transition
from backend.jobs.tables import FINISHED, Job, JobStatus, JobTask
from backend.settings import get_settings
from backend.timeutil import format_duration, utcnow

log = logging.getLogger(__name__)

MAX_RETRIES = 3  # transient errors of one task, then the job fails
MAX_LOSSES = 3  # a task whose worker is lost this many times fails its job instead of killing another
RETRY_BASE_SECONDS = 10
RETRY_MAX_SECONDS = 600

SKIPPED = "skipped"
CANCELLED = "cancelled"
FAILED = "failed"


class JobFailure(RuntimeError):
    """A final failure whose message is shown to the user as is."""


class TimeLimitExceeded(JobFailure):
    pass


class AlreadyCompleted(RuntimeError):
    """Another delivery of the task completed it first: roll back, nothing is written twice."""


class RetryLater(Exception):
    def __init__(self, delay: float, cause: BaseException):
        super().__init__(f"retry in {delay:.0f}s: {describe(cause)}")
        self.delay = delay


def retry_delay(retries_so_far: int, base: float = RETRY_BASE_SECONDS) -> float:
    """Exponential backoff with jitter: ~10 s, 20 s, 40 s, ... capped at 10 minutes."""
    return min(RETRY_MAX_SECONDS, base * 2 ** retries_so_far) * random.uniform(0.8, 1.2)


def owner_name(delivery: str) -> str:
    """Who holds a lease: the delivery (a Celery task id and its retry) at host:pid."""
    return f"{delivery}@{socket.gethostname()}:{os.getpid()}"


def _is_own_retry(owner: str, holder: str) -> bool:
    """The holder is an earlier attempt of this same message (Celery id#retries): a retry whose release of the
    lease did not get through (the database was down). A retry is sent only by a holder that stopped working."""
    (mine, _, my_try), (theirs, _, their_try) = (o.split("@", 1)[0].partition("#") for o in (owner, holder))
    return mine == theirs and my_try.isdigit() and their_try.isdigit() and int(my_try) > int(their_try)


# --- errors ----------------------------------------------------------------------------------------


def _causes(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def is_out_of_memory(exc: BaseException) -> bool:
    """A CUDA or host out-of-memory anywhere in the cause chain."""
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch else None
    for cause in _causes(exc):
        if oom_type is not None and isinstance(cause, oom_type):
            return True
        if isinstance(cause, MemoryError) or (isinstance(cause, RuntimeError) and (
                "out of memory" in str(cause).lower() or "can't allocate memory" in str(cause).lower())):
            return True
    return False


def is_transient(exc: BaseException, *, gpu_out_of_memory: bool = False) -> bool:
    """Lost or busy database connections (and, when asked, CUDA out-of-memory) anywhere in the cause chain."""
    torch = sys.modules.get("torch")
    cuda_oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch else None
    for cause in _causes(exc):
        if isinstance(cause, (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.DisconnectionError,
                              sa_exc.TimeoutError)):
            return True
        if isinstance(cause, sa_exc.DBAPIError) and cause.connection_invalidated:
            return True
        if gpu_out_of_memory and cuda_oom is not None and isinstance(cause, cuda_oom):
            return True
        module = type(cause).__module__ or ""
        if module.startswith("psycopg") and type(cause).__name__ in {"OperationalError", "InterfaceError"}:
            return True
    return False


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


# --- the context a run function gets ---------------------------------------------------------------


@dataclass
class TaskContext:
    kind: JobKind
    task_id: int
    job_id: int
    label: str
    args: dict[str, Any]
    owner: str
    soft_deadline: float  # time.monotonic()
    soft_limit_seconds: float
    lease_seconds: float = field(default_factory=lambda: get_settings().lease_seconds)
    lease_lost: bool = False
    # False in `run_here`, which runs the tasks a run function adds itself; a worker sends them to the broker
    sends_new_tasks: bool = True

    def beat(self, *, done: int | None = None, total: int | None = None, message: str | None = None,
             stopped: str = "", session: Session | None = None) -> bool:
        """Progress, a renewed lease and a cancel check in one short transaction (or in `session`, left for its
        owner to commit). False: stop now (a cancel, which this records as `cancelled` with `stopped` saying
        where; the job ended elsewhere; or the lease is gone). Past the soft time limit, raises TimeLimitExceeded."""
        if time.monotonic() > self.soft_deadline:
            raise TimeLimitExceeded(
                f"{self.kind.title} stopped: {self.label} ran past its time limit of "
                f"{format_duration(self.soft_limit_seconds)}: BUDGETLAB_TIME_LIMIT_FLOOR_SECONDS, plus for generation "
                "its tokens at BUDGETLAB_SLOWEST_TOKENS_PER_SECOND "
                f"({get_settings().slowest_tokens_per_second:g}). Raise the floor, or lower the rate for a slower "
                "worker; or split the work.")
        if session is not None:
            return self._beat_in(session, done, total, message, stopped)
        with session_scope() as own:
            return self._beat_in(own, done, total, message, stopped)

    def _beat_in(self, session: Session, done: int | None, total: int | None, message: str | None,
                 stopped: str) -> bool:
        job = lock_job(session, self.job_id)
        status = JobStatus(job.status)
        if status in FINISHED:
            return False
        if status == JobStatus.cancelling:
            job.message = f"cancelled: stopped {stopped}".strip()[:1000]
            transition(session, job, JobStatus.cancelled, f"cancel requested; stopped {stopped}".strip())
            return False
        if not self._renew(session):
            return False
        if total is not None:
            job.progress_total = total
        if done is not None:
            job.progress_done = min(done, job.progress_total) if job.progress_total else done
        if message is not None:
            job.message = message[:1000]
        job.heartbeat_at = utcnow()
        session.add(job)
        return True

    def _renew(self, session: Session) -> bool:
        renewed = session.execute(update(JobTask).where(JobTask.id == self.task_id, JobTask.lease_owner == self.owner,
                                                        JobTask.completed_at.is_(None))
                                  .values(lease_expires_at=utcnow() + timedelta(seconds=self.lease_seconds)))
        if renewed.rowcount == 0:
            self.lease_lost = True
            log.warning("%s of job %s: the lease went to another worker (this one was presumed lost); stopping",
                        self.label, self.job_id)
            return False
        return True

    def complete(self, session: Session) -> Job | None:
        """Mark this task done in the caller's transaction (the one writing its results). Returns the locked job
        when this was its last task and the job has not ended (the caller then records the results and calls
        `succeed`); None otherwise. Raises AlreadyCompleted when another delivery completed it first."""
        job = lock_job(session, self.job_id)
        task = session.exec(select(JobTask).where(JobTask.id == self.task_id).with_for_update()
                            .execution_options(populate_existing=True)).one()
        if task.completed_at is not None:
            raise AlreadyCompleted(f"{self.label} of job {self.job_id} was completed by {task.completed_by}")
        task.completed_at, task.completed_by = utcnow(), self.owner
        task.lease_owner, task.lease_expires_at = None, None
        session.add(task)
        session.flush()
        if JobStatus(job.status) in FINISHED:
            return None
        left = session.exec(select(func.count()).select_from(JobTask).where(
            JobTask.job_id == self.job_id, JobTask.completed_at.is_(None))).one()
        if left:
            job.heartbeat_at = utcnow()
            session.add(job)
            return None
        return job

    def note_progress(self, session: Session, *, done: int, message: str) -> None:
        """Progress written in the caller's transaction (after `complete`, which locked the job)."""
        job = lock_job(session, self.job_id)
        if JobStatus(job.status) not in FINISHED:
            job.progress_done = min(done, job.progress_total) if job.progress_total else done
            job.message = message[:1000]
            session.add(job)

    def succeed(self, session: Session, job: Job, message: str) -> None:
        job.progress_done = job.progress_total
        job.message = message[:1000]
        if job.status == JobStatus.queued.value:
            transition(session, job, JobStatus.running, f"{self.label} finished")
        transition(session, job, JobStatus.succeeded, message[:200])


# --- claiming --------------------------------------------------------------------------------------


def claim(kind: JobKind, task_id: int, owner: str, *, in_process: bool = False) -> TaskContext | str:
    """Take the task's lease for `owner`; or the reason not to run it (already done, the job ended,
    another worker holds a live lease)."""
    settings = get_settings()
    with session_scope() as session:
        task = session.get(JobTask, task_id)
        if task is None:
            return SKIPPED  # its job was deleted
        job = lock_job(session, task.job_id)
        task = session.exec(select(JobTask).where(JobTask.id == task_id).with_for_update()
                            .execution_options(populate_existing=True)).one()
        status = JobStatus(job.status)
        if job.kind != kind.name:  # a message for another kind's task (e.g. queued before an upgrade)
            log.warning("task %s belongs to a %s job, not %s; skipped", task_id, job.kind, kind.name)
            return SKIPPED
        if task.completed_at is not None:
            return SKIPPED
        if status in FINISHED:
            return status.value  # cancelled, or failed by another task
        if status == JobStatus.cancelling:
            if not _live_leases(session, job.id, except_task=task_id):
                transition(session, job, JobStatus.cancelled, f"cancel requested; {task.label} not started")
            return CANCELLED
        now = utcnow()
        if task.lease_owner is not None:
            live = task.lease_expires_at is not None and task.lease_expires_at > now
            if live and not _is_own_retry(owner, task.lease_owner):
                # A second delivery while the holder works (a Redis redelivery, a resend), or a holder that died
                # moments ago: either way its lease decides, and the reconciler acts when it expires.
                log.info("%s of job %s is held by %s until %s; not running it twice", task.label, job.id,
                         task.lease_owner, task.lease_expires_at)
                return SKIPPED
            if not live and lost(session, kind, job, task, f"the lease of {task.lease_owner} expired") != "rerun":
                return FAILED
        task.lease_owner = owner
        task.lease_expires_at = now + timedelta(seconds=settings.lease_seconds)
        task.claimed_at = now
        task.claims += 1
        session.add(task)
        if status == JobStatus.queued:
            transition(session, job, JobStatus.running, f"{task.label} started")
        job.heartbeat_at = now
        session.add(job)
        return TaskContext(kind=kind, task_id=task.id, job_id=job.id, label=task.label, args=dict(task.args),
                           owner=owner, soft_deadline=time.monotonic() + task.soft_limit_seconds,
                           soft_limit_seconds=task.soft_limit_seconds, lease_seconds=settings.lease_seconds,
                           sends_new_tasks=not in_process)


def _live_leases(session: Session, job_id: int, except_task: int | None = None) -> int:
    query = select(func.count()).select_from(JobTask).where(
        JobTask.job_id == job_id, JobTask.completed_at.is_(None), JobTask.lease_expires_at > utcnow())
    if except_task is not None:
        query = query.where(JobTask.id != except_task)
    return session.exec(query).one()


def _lost_too_often(kind: JobKind, task: JobTask) -> str:
    return (f"{kind.title} failed: {task.label} lost its worker {task.losses} times "
            "(killed, out of host memory, hung, or its machine restarted). Check the workers' logs and memory, then "
            "start it again.")


def lost(session: Session, kind: JobKind, job: Job, task: JobTask, why: str) -> str:
    """A task's worker is gone (`why`). Rerunnable kinds get the task back for another worker ("rerun"); the
    others fail the job with what was kept ("failed"). The job is locked by the caller."""
    task.losses += 1
    task.lease_owner, task.lease_expires_at = None, None
    session.add(task)
    if kind.rerun_when_lost and task.losses < MAX_LOSSES:
        record_event(session, job, f"{task.label}: {why}; it runs again")
        return "rerun"
    message = (_lost_too_often(kind, task) if kind.rerun_when_lost else
               kind.describe_lost(session, job) if kind.describe_lost else
               f"{kind.title} failed: {task.label}'s worker was lost ({why}). Start it again.")
    fail_unless_finished(session, job.id, message)
    return "failed"


# --- running ---------------------------------------------------------------------------------------


def execute(kind: JobKind, task_id: int, owner: str, *, retries_so_far: int = 0, in_process: bool = False) -> str:
    """Claim and run one task; its outcome in a word. Raises RetryLater for a transient error with retries left.
    ``in_process``: tasks the run adds are left for this process (`run_here`), not sent."""
    prepare = kind.prepare_function()
    if prepare is not None:
        _prepare(prepare, task_id)
    ctx = claim(kind, task_id, owner, in_process=in_process)
    if isinstance(ctx, str):
        return ctx
    try:
        return kind.run_function()(ctx) or "done"
    except AlreadyCompleted as exc:
        log.info("%s", exc)
        return SKIPPED
    except JobFailure as exc:
        fail_job(ctx.job_id, str(exc))
        return FAILED
    except (KeyboardInterrupt, SystemExit):  # the worker is stopping: the message is delivered again
        raise
    except Exception as exc:
        if _is_soft_time_limit(exc):
            fail_job(ctx.job_id, f"{kind.title} stopped: {ctx.label} ran past its time limit of "
                                 f"{format_duration(ctx.soft_limit_seconds)}.")
            return FAILED
        if kind.retry_transient and is_transient(exc, gpu_out_of_memory=kind.retry_gpu_out_of_memory):
            return _transient(ctx, exc, retries_so_far)
        log.exception("%s of job %s failed", ctx.label, ctx.job_id)
        fail_job(ctx.job_id, f"{kind.title} failed: {describe(exc).rstrip('.')} (in {ctx.label}). See the worker "
                             "log for the traceback.")
        return FAILED


def _prepare(prepare, task_id: int) -> None:
    """Warm up before the claim, for a task that will run; a failure here is left for the run itself to meet (and
    report) under its lease."""
    with session_scope(immediate=False) as session:
        task = session.get(JobTask, task_id)
        job = session.get(Job, task.job_id) if task is not None else None
        if job is None or task.completed_at is not None or JobStatus(job.status) in FINISHED | {JobStatus.cancelling}:
            return
        args = dict(task.args)
    try:
        prepare(args)
    except Exception as exc:
        if _is_soft_time_limit(exc):
            raise
        log.warning("preparing task %s failed (%s); its run will report it", task_id, describe(exc))


def _is_soft_time_limit(exc: BaseException) -> bool:
    return type(exc).__name__ == "SoftTimeLimitExceeded"  # celery.exceptions, raised in prefork workers


def _transient(ctx: TaskContext, exc: BaseException, retries_so_far: int) -> str:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()  # what the failed batch held, before the retry
    if retries_so_far >= MAX_RETRIES:
        fail_job(ctx.job_id, f"{ctx.label} failed {retries_so_far + 1} times with a transient error; giving up. "
                             f"Last error: {describe(exc)}")
        return FAILED
    delay = retry_delay(retries_so_far)
    try:  # best effort: the database may be what is down; then the lease expires on its own
        with session_scope() as session:
            job = lock_job(session, ctx.job_id)
            # Counted as a send due after the backoff: should the retry message itself be lost, the reconciler
            # sends the task again like any other unclaimed one.
            session.execute(update(JobTask).where(JobTask.id == ctx.task_id, JobTask.lease_owner == ctx.owner)
                            .values(lease_owner=None, lease_expires_at=None, sends=JobTask.sends + 1,
                                    sent_at=utcnow() + timedelta(seconds=delay)))
            if JobStatus(job.status) not in FINISHED:
                job.message = (f"{ctx.label}: transient error, retry {retries_so_far + 1}/{MAX_RETRIES} in "
                               f"{delay:.0f}s ({describe(exc)})")[:1000]
                session.add(job)
    except Exception:
        log.warning("could not release %s of job %s before its retry", ctx.label, ctx.job_id)
    log.warning("%s of job %s: %s; retry %d/%d in %.0fs", ctx.label, ctx.job_id, describe(exc), retries_so_far + 1,
                MAX_RETRIES, delay)
    raise RetryLater(delay, exc) from exc


def fail_job(job_id: int, message: str) -> None:
    """Fail the job with a message a person can act on (unless it already ended); logged if even that fails."""
    try:
        with session_scope() as session:
            fail_unless_finished(session, job_id, message)
    except Exception:
        log.exception("could not mark job %s failed: %s", job_id, message)


def run_here(job_id: int, *, backoff_seconds: float = 2.0) -> str:
    """Run every task of a job in this process, in order, with the same retry policy (the CLI's --local); also
    the tasks a run adds (an adaptive probe's later rounds). Returns the job's final status."""
    delivery = f"local-{uuid.uuid4().hex[:8]}"
    with session_scope() as session:
        kind = get_kind(session.get(Job, job_id).kind)
    tried: set[int] = set()
    while True:
        with session_scope() as session:
            task_ids = [task_id for task_id in session.exec(
                select(JobTask.id).where(JobTask.job_id == job_id, JobTask.completed_at.is_(None))
                .order_by(JobTask.id)) if task_id not in tried]
            if not task_ids or JobStatus(session.get(Job, job_id).status) in FINISHED:
                return session.get(Job, job_id).status
            session.execute(update(JobTask).where(JobTask.id.in_(task_ids)).values(sent_at=utcnow()))
        for task_id in task_ids:
            tried.add(task_id)
            for attempt in range(MAX_RETRIES + 1):
                try:
                    outcome = execute(kind, task_id, owner_name(f"{delivery}-{task_id}#{attempt}"),
                                      retries_so_far=attempt, in_process=True)
                    break
                except RetryLater:
                    time.sleep(backoff_seconds * 2 ** attempt)
            if outcome in (CANCELLED, FAILED):
                with session_scope() as session:
                    return session.get(Job, job_id).status
