"""Labels brought back from annotators, what was sent to them, and the Label Studio connection.

A prompt's current answer lives on the prompt (`Prompt.answer` / `Prompt.gold`), where probing,
training and export read it. Each import is a label set; each answer it gave is a `PromptLabel`
row holding the answer it replaced, so history is kept and an import can be undone."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, ForeignKey, Index, Integer, Text
from sqlmodel import Field, SQLModel

from backend.auth.tables import created_by_field
from backend.timeutil import utcnow

_BIGINT = BigInteger().with_variant(Integer, "sqlite")


class LabelSet(SQLModel, table=True):
    __tablename__ = "label_set"
    id: int | None = Field(default=None, primary_key=True)
    pool_id: int = Field(sa_column=Column(Integer, ForeignKey("pool.id", ondelete="CASCADE"), index=True,
                                          nullable=False))
    source: str = Field(description="The file name, or the Label Studio project the labels were pulled from")
    format: str = Field(description="label-studio, argilla, csv or jsonl")
    token_name: str | None = Field(default=None, description="Name of the API token that imported it")
    label_count: int = Field(default=0, description="Prompts this import answered (changed or confirmed)")
    changed_count: int = Field(default=0, description="Of those, prompts that had another answer before")
    report: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = created_by_field()
    undone_at: datetime | None = None
    undone_by: str | None = None


class PromptLabel(SQLModel, table=True):
    """One answer an import gave (changed or confirmed), and the answer it replaced (None: the prompt had none)."""

    __tablename__ = "prompt_label"
    __table_args__ = (Index("ix_prompt_label_prompt", "prompt_id", "id"),)
    id: int | None = Field(default=None, sa_column=Column(_BIGINT, primary_key=True, autoincrement=True))
    label_set_id: int = Field(sa_column=Column(Integer, ForeignKey("label_set.id", ondelete="CASCADE"), index=True,
                                               nullable=False))
    prompt_id: int = Field(sa_column=Column(_BIGINT, ForeignKey("prompt.id", ondelete="CASCADE"), nullable=False))
    answer: str = Field(sa_column=Column(Text, nullable=False))
    gold: str = Field(sa_column=Column(Text, nullable=False))
    previous_answer: str | None = Field(default=None, sa_column=Column(Text))
    previous_gold: str | None = Field(default=None, sa_column=Column(Text))
    annotations: int = Field(default=1, description="Annotations of this prompt in the import")
    agreeing: int = Field(default=1, description="Of those, how many gave the answer kept (the majority)")


class LabelingExport(SQLModel, table=True):
    """Prompts sent for labeling: a file downloaded, or tasks pushed to a Label Studio project."""

    __tablename__ = "labeling_export"
    id: int | None = Field(default=None, primary_key=True)
    pool_id: int = Field(sa_column=Column(Integer, ForeignKey("pool.id", ondelete="CASCADE"), index=True,
                                          nullable=False))
    subset_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("subset.id",
                                                                                     ondelete="SET NULL")))
    format: str = Field(description="label-studio, argilla, csv, jsonl, or label-studio-project (pushed)")
    prompt_count: int
    label_studio_project_id: int | None = None
    label_studio_url: str | None = None
    job_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("job.id", ondelete="SET NULL")))
    token_name: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class LabelJob(SQLModel, table=True):
    """What a labeling job works on (the job row holds its status): push, pull or regrade."""

    __tablename__ = "label_job"
    job_id: int = Field(sa_column=Column(Integer, ForeignKey("job.id", ondelete="CASCADE"), primary_key=True))
    action: str = Field(description="push, pull or regrade")
    pool_id: int = Field(sa_column=Column(Integer, ForeignKey("pool.id", ondelete="CASCADE"), nullable=False))
    subset_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("subset.id",
                                                                                     ondelete="CASCADE")))
    prompt_ids: list[int] | None = Field(default=None, sa_column=Column(JSON),
                                         description="regrade: the prompts whose answers changed")
    token_name: str | None = None
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class LabelStudioConnection(SQLModel, table=True):
    """The one Label Studio server this Budgetlab talks to. The key is write-only: no endpoint returns it."""

    __tablename__ = "label_studio_connection"
    id: int | None = Field(default=None, primary_key=True)
    url: str
    api_key: str = Field(sa_column=Column(Text, nullable=False))
    updated_at: datetime = Field(default_factory=utcnow)
    updated_by: str | None = None
