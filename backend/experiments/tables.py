"""An experiment: one budget on one probe, a subset and a training run per strategy, identical settings."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, ForeignKey, Integer
from sqlmodel import Field, SQLModel

from backend.auth.tables import created_by_field
from backend.timeutil import utcnow


class Experiment(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str
    probe_id: int = Field(sa_column=Column(Integer, ForeignKey("probe.id", ondelete="CASCADE"), index=True,
                                           nullable=False))
    pool_id: int = Field(sa_column=Column(Integer, ForeignKey("pool.id", ondelete="CASCADE"), nullable=False))
    budget_kind: str
    budget_value: float
    cost_per_prompt: float | None = None
    n: int = Field(description="Prompts per strategy: the budget in prompts")
    strategies: list[str] = Field(sa_column=Column(JSON, nullable=False))
    settings: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False),
                                     description="The TrainingSettings every run of the experiment uses")
    band_low: float | None = None
    band_high: float | None = None
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = created_by_field()
