from datetime import datetime

from sqlalchemy import Column, ForeignKey, Integer
from sqlmodel import Field, SQLModel

from backend.timeutil import utcnow


class AuditEvent(SQLModel, table=True):
    """One state-changing request or sign-in: appended, never updated or deleted by the product."""

    __tablename__ = "audit_event"
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    user_id: int | None = Field(default=None, sa_column=Column(
        Integer, ForeignKey("app_user.id", ondelete="SET NULL"), index=True, nullable=True))
    actor: str = Field(description="The user's name when it happened ('anonymous' before sign-in)")
    via: str = Field(description="token, session or none")
    operation: str = Field(description="Method and route, e.g. 'DELETE /api/pools/{pool_id}'")
    kind: str = Field(index=True, description="What it acts on: pool, probe, subset, run, experiment, job, ...")
    target: str | None = Field(default=None, description="Which one: 'pool 12' (from the path, or the row created)")
    address: str | None = Field(default=None, description="The client's address as the server saw it")
    outcome: str = Field(description="succeeded (committed with the change), failed or refused")
    status: int | None = Field(default=None, description="HTTP status, for requests that changed nothing")
