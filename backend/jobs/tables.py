from datetime import datetime
from enum import StrEnum

from sqlalchemy import Column, ForeignKey, Integer
from sqlmodel import Field, SQLModel

from backend.timeutil import utcnow


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelling = "cancelling"
    cancelled = "cancelled"


FINISHED = {JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled}


class Job(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True, description="What the job does: probe, ...")
    # Written only by backend.jobs.service.transition.
    status: str = Field(default=JobStatus.queued.value, index=True)
    progress_done: int = 0
    progress_total: int = 0
    message: str = ""
    error: str | None = None
    attempts: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None


class JobEvent(SQLModel, table=True):
    __tablename__ = "job_event"
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(sa_column=Column(Integer, ForeignKey("job.id", ondelete="CASCADE"), index=True))
    from_status: str | None = None
    to_status: str
    reason: str
    at: datetime = Field(default_factory=utcnow)
