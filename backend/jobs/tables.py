from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Integer
from sqlmodel import Field, SQLModel

from backend.auth.tables import created_by_field
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
    created_by_id: int | None = created_by_field()
    work_tokens: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, server_default="0"),
                             description="Tokens it will generate (probe: prompts x k x max new tokens; run: steps x "
                                         "batch x completion length), for the user's quota")
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


class JobTask(SQLModel, table=True):
    """One unit of a job's work (a probe shard, a training run): the outbox row its message is sent from,
    and the lease its worker holds while it runs. Written by backend.jobs (dispatch, engine, reconciler)."""

    __tablename__ = "job_task"
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(sa_column=Column(Integer, ForeignKey("job.id", ondelete="CASCADE"), index=True,
                                         nullable=False))
    label: str = Field(description="How messages name it: 'shard 3', 'the run'")
    args: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False),
                                 description="What the kind's run function reads: ids only")
    soft_limit_seconds: float = Field(description="Past this the work stops and the job fails (time limit)")
    hard_limit_seconds: float = Field(description="Past this the reconciler fails the job, even if the worker hangs")
    created_at: datetime = Field(default_factory=utcnow)
    sent_at: datetime | None = Field(default=None, index=True, description="None: in the outbox, not sent yet")
    sends: int = 0
    claimed_at: datetime | None = None
    claims: int = 0
    losses: int = Field(default=0, description="Times its worker was lost while holding it")
    lease_owner: str | None = Field(default=None, description="host:pid/delivery of the worker running it")
    lease_expires_at: datetime | None = Field(default=None, index=True)
    completed_at: datetime | None = None
    completed_by: str | None = None
