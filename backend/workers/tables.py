from datetime import datetime

from sqlmodel import Field, SQLModel

from backend.timeutil import utcnow


class WorkerBeat(SQLModel, table=True):
    """A worker process that is consuming tasks, as it last said so. A row whose `seen_at` is older
    than a few beat intervals belongs to a worker that died without saying goodbye."""

    __tablename__ = "worker_beat"
    name: str = Field(primary_key=True, description="host:pid, unique per live process")
    hostname: str
    pid: int
    queues: str = Field(description="comma-separated queues it consumes")
    started_at: datetime = Field(default_factory=utcnow)
    seen_at: datetime = Field(default_factory=utcnow, index=True)
