"""Per-user limits on unfinished work, checked as a job is created (so a refused request leaves nothing behind).

A user's unfinished jobs (queued, running or cancelling) may number at most BUDGETLAB_QUOTA_ACTIVE_JOBS and hold at
most BUDGETLAB_QUOTA_QUEUED_TOKENS tokens to generate (prompts x k x max new tokens for a probe, steps x batch x
completion length for a run). The user is the one the request acts for; jobs made by the system (the worker, the
CLI) have none and no quota. The refusal is a 429 that says what is in use and what to cancel.
"""

from sqlalchemy import func
from sqlmodel import Session, select

from backend.auth.tables import User
from backend.errors import AppError
from backend.jobs.tables import Job, JobStatus
from backend.settings import get_settings

UNFINISHED = (JobStatus.queued.value, JobStatus.running.value, JobStatus.cancelling.value)
LISTED = 5


def _in_use(session: Session, user_id: int) -> str:
    biggest = session.exec(select(Job.id, Job.kind, Job.work_tokens).where(
        Job.created_by_id == user_id, Job.status.in_(UNFINISHED))
        .order_by(Job.work_tokens.desc(), Job.id).limit(LISTED)).all()
    return ", ".join(f"job {i} ({kind}, {tokens:,} tokens)" for i, kind, tokens in biggest)


def enforce(session: Session, user_id: int | None, kind: str, tokens: int) -> None:
    """Refuse (429) a new job of ``tokens`` for ``user_id`` when it would exceed their quota."""
    if user_id is None:
        return
    settings = get_settings()
    # Two submissions of one user count one after the other (Postgres; SQLite's write lock already does it).
    session.exec(select(User.id).where(User.id == user_id).with_for_update()).first()
    count, queued = session.exec(select(func.count(), func.coalesce(func.sum(Job.work_tokens), 0)).where(
        Job.created_by_id == user_id, Job.status.in_(UNFINISHED))).one()
    cancel = "Cancel one on its page (or POST /api/jobs/{id}/cancel), or wait for one to finish, then try again"
    if count + 1 > settings.quota_active_jobs:
        raise AppError(429, f"Quota: you have {count} unfinished jobs, the most one user may have "
                            f"({settings.quota_active_jobs}): {_in_use(session, user_id)}. {cancel}.")
    if queued + tokens > settings.quota_queued_tokens:
        raise AppError(429, f"Quota: this {kind} job would generate about {tokens:,} tokens and your unfinished "
                            f"jobs hold {int(queued):,}, over your {settings.quota_queued_tokens:,}. In use: "
                            f"{_in_use(session, user_id) or 'nothing'}. {cancel}, or make this job smaller (fewer "
                            f"prompts, a smaller k or max new tokens, fewer steps).")
