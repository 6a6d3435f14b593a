from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Column, Float, ForeignKey, Index, Integer, String, Text
from sqlmodel import Field, SQLModel

from backend.auth.tables import created_by_field
from backend.timeutil import utcnow

_BIGINT = BigInteger().with_variant(Integer, "sqlite")


class Probe(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    pool_id: int = Field(sa_column=Column(Integer, ForeignKey("pool.id", ondelete="CASCADE"), index=True,
                                          nullable=False))
    job_id: int = Field(sa_column=Column(Integer, ForeignKey("job.id"), nullable=False))
    model: str
    k: int
    temperature: float
    max_new_tokens: int
    template: str | None = Field(default=None, sa_column=Column(Text))
    chat_template_options: dict[str, Any] | None = Field(
        default=None, sa_column=Column(JSON), description="Keyword arguments for the chat template")
    grading_policy: str = Field(default="lenient", sa_column=Column(String(), nullable=False,
                                                                    server_default="lenient"))
    seed: int
    # True: difficulty is agreement-based, since some prompt has no gold answer. Labels that arrive
    # later re-grade the stored samples; once every prompt is graded it becomes False.
    label_free: bool
    scores_revision: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"),
                                 description="Bumped each time labels re-grade the scores")
    shard_size: int
    prompt_count: int
    samples_per_second: float | None = None
    # An adaptive probe's stop rule (backend.curation.adaptive.StopRule as a dict); None: k samples of every prompt.
    adaptive: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    samples_drawn: int | None = Field(default=None, sa_column=Column(_BIGINT),
                                      description="Samples the probe drew, set when it succeeds")
    # A trained run's LoRA adapter applied to the model (a re-probe, backend.runs.reprobe); None: the model itself.
    adapter_path: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = created_by_field()


class ProbeShard(SQLModel, table=True):
    """A slice of the pool (by prompt position). Its results commit together with completed_at.

    An adaptive probe's later rounds add shards whose ``prompt_ids`` name the prompts still open in that slice."""

    __tablename__ = "probe_shard"
    probe_id: int = Field(sa_column=Column(Integer, ForeignKey("probe.id", ondelete="CASCADE"),
                                           primary_key=True))
    shard_index: int = Field(primary_key=True)
    first_position: int
    end_position: int = Field(description="exclusive")
    completed_at: datetime | None = None
    seconds: float | None = None
    round: int = Field(default=1, sa_column=Column(Integer, nullable=False, server_default="1"))
    prompt_ids: list[int] | None = Field(default=None, sa_column=Column(JSON),
                                         description="None: every prompt of the slice")

    @property
    def size(self) -> int:
        """Prompts it samples."""
        return len(self.prompt_ids) if self.prompt_ids is not None else self.end_position - self.first_position


class PromptScore(SQLModel, table=True):
    __tablename__ = "prompt_score"
    probe_id: int = Field(sa_column=Column(Integer, ForeignKey("probe.id", ondelete="CASCADE"),
                                           primary_key=True))
    prompt_id: int = Field(sa_column=Column(_BIGINT, ForeignKey("prompt.id", ondelete="CASCADE"),
                                            primary_key=True))
    k: int
    correct_count: int | None = None
    pass_rate: float | None = Field(default=None, sa_column=Column(Float))
    wilson_low: float | None = Field(default=None, sa_column=Column(Float))
    wilson_high: float | None = Field(default=None, sa_column=Column(Float))
    agreement: float = Field(sa_column=Column(Float, nullable=False))
    majority_answer: str | None = Field(default=None, sa_column=Column(Text))
    base_wrong: bool = Field(sa_column=Column(Boolean, nullable=False))
    difficulty: float = Field(sa_column=Column(Float, nullable=False, index=True))


class Sample(SQLModel, table=True):
    __table_args__ = (Index("ix_sample_probe_prompt", "probe_id", "prompt_id", "sample_index", unique=True),)
    id: int | None = Field(default=None, sa_column=Column(_BIGINT, primary_key=True, autoincrement=True))
    probe_id: int = Field(sa_column=Column(Integer, ForeignKey("probe.id", ondelete="CASCADE"), nullable=False))
    prompt_id: int = Field(sa_column=Column(_BIGINT, ForeignKey("prompt.id", ondelete="CASCADE"), nullable=False))
    sample_index: int
    completion: str = Field(sa_column=Column(Text, nullable=False))
    extracted_answer: str | None = Field(default=None, sa_column=Column(Text))
    correct: bool | None = None
