from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from backend.auth.tables import created_by_field
from backend.timeutil import utcnow


class Pool(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str
    task_type: str = Field(description="numeric, math, choice or exact: how answers are graded")
    has_answers: bool = Field(description="Every prompt has an answer. False: probes measure agreement (label-free)")
    prompt_count: int = 0
    source_filename: str | None = None
    source_format: str | None = None
    cost_per_label: float | None = Field(default=None, description="What one label costs, for money spent")
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = created_by_field()


class Prompt(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("pool_id", "external_id", name="uq_prompt_pool_external_id"),
        Index("ix_prompt_pool_position", "pool_id", "position"),
    )
    id: int | None = Field(default=None, sa_column=Column(BigInteger().with_variant(Integer, "sqlite"),
                                                          primary_key=True, autoincrement=True))
    pool_id: int = Field(sa_column=Column(Integer, ForeignKey("pool.id", ondelete="CASCADE"), nullable=False))
    position: int = Field(description="0-based order in the uploaded file")
    external_id: str = Field(description="The id from the file, or generated from the position")
    text: str = Field(sa_column=Column(Text, nullable=False))
    answer: str | None = Field(default=None, sa_column=Column(Text))
    gold: str | None = Field(default=None, sa_column=Column(Text), description="answer normalised for grading")
