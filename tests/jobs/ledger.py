"""What the ledger says about a job: its row, its tasks, the reasons of its events."""

from sqlmodel import select

from backend.database import session_scope
from backend.jobs.tables import Job, JobEvent, JobTask


def job_of(job_id: int) -> Job:
    with session_scope() as session:
        return session.get(Job, job_id)


def tasks_of(job_id: int) -> list[JobTask]:
    with session_scope() as session:
        return list(session.exec(select(JobTask).where(JobTask.job_id == job_id).order_by(JobTask.id)))


def reasons(job_id: int) -> list[str]:
    with session_scope() as session:
        return list(session.exec(select(JobEvent.reason).where(JobEvent.job_id == job_id).order_by(JobEvent.id)))
