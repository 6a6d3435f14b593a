"""Job status changes go through `transition` and nothing else."""

from sqlmodel import Session, select

from backend.audit.trail import current_draft
from backend.database import get_or_404
from backend.errors import AppError
from backend.jobs import quota
from backend.jobs.tables import FINISHED, Job, JobEvent, JobStatus
from backend.timeutil import utcnow

S = JobStatus
ALLOWED: dict[JobStatus, set[JobStatus]] = {
    S.queued: {S.running, S.cancelled, S.failed},
    S.running: {S.succeeded, S.failed, S.cancelling},
    S.cancelling: {S.cancelled, S.failed, S.succeeded},
    S.succeeded: set(),
    S.failed: set(),
    S.cancelled: set(),
}


class TransitionError(AppError):
    def __init__(self, job: Job, to: JobStatus):
        super().__init__(409, f"Job {job.id} is {job.status}; it cannot become {to.value}.")


def transition(session: Session, job: Job, to: JobStatus, reason: str, *, error: str | None = None) -> Job:
    """Move a job to `to`, checking the transition and recording an event with the reason."""
    current = JobStatus(job.status)
    if to not in ALLOWED[current]:
        raise TransitionError(job, to)
    now = utcnow()
    job.status = to.value
    if to == S.running and job.started_at is None:
        job.started_at = now
    if to == S.running:
        job.attempts += 1
        job.heartbeat_at = now  # a fresh start: silence is counted from here, not from an earlier attempt
    if to in FINISHED:
        job.finished_at = now
    if error is not None:
        job.error = error
    session.add(job)
    session.add(JobEvent(job_id=job.id, from_status=current.value, to_status=to.value, reason=reason, at=now))
    session.flush()
    return job


def create_job(session: Session, kind: str, total: int = 0, message: str = "waiting for a worker", *,
               tokens: int = 0) -> Job:
    """A queued job of ``tokens`` to generate, within the quota of the user the request acts for (429 if not)."""
    draft = current_draft()
    quota.enforce(session, draft.user_id if draft else None, kind, tokens)
    job = Job(kind=kind, progress_total=total, message=message, work_tokens=tokens)
    session.add(job)
    session.flush()
    session.add(JobEvent(job_id=job.id, from_status=None, to_status=S.queued.value, reason="created"))
    session.flush()
    return job


def get_job(session: Session, job_id: int) -> Job:
    return get_or_404(session, Job, job_id)


def request_cancel(session: Session, job: Job) -> Job:
    """Queued jobs are cancelled at once; running ones are asked to stop at the next batch."""
    job = lock_job(session, job.id)  # the worker may have just started or ended it
    status = JobStatus(job.status)
    if status in FINISHED:
        raise AppError(409, f"Job {job.id} already finished ({status.value}); there is nothing to cancel.")
    if status == S.cancelling:
        return job
    if status == S.queued:
        return transition(session, job, S.cancelled, "cancelled by user before it started")
    return transition(session, job, S.cancelling, "cancel requested by user")


def events(session: Session, job_id: int, *, limit: int | None = None, offset: int = 0) -> list[JobEvent]:
    query = select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
    return list(session.exec(query.offset(offset).limit(limit)))


def lock_job(session: Session, job_id: int) -> Job:
    """The job row, fresh and locked until commit on Postgres (SQLite serialises writers anyway)."""
    query = select(Job).where(Job.id == job_id).with_for_update().execution_options(populate_existing=True)
    return session.exec(query).one()


def fail_unless_finished(session: Session, job_id: int, message: str) -> None:
    """Fail a job with a message a person can act on, unless it already ended."""
    job = lock_job(session, job_id)
    if JobStatus(job.status) in FINISHED:
        return
    job.message = message[:1000]
    transition(session, job, S.failed, message[:1000], error=message)


def record_event(session: Session, job: Job, reason: str) -> None:
    """An action on the job that leaves its status as it is (the reconciler's, a task run again)."""
    session.add(JobEvent(job_id=job.id, from_status=job.status, to_status=job.status, reason=reason[:1000]))
    session.flush()
