"""Training runs and their logged metrics (one row per run, step and key)."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Float, ForeignKey, Integer, String, Text
from sqlmodel import Field, SQLModel

from backend.auth.tables import created_by_field
from backend.experiments.tables import Experiment  # noqa: F401  (run.experiment_id's target table)
from backend.timeutil import utcnow


class Run(SQLModel, table=True):
    """A GRPO training run on a frozen subset; its job carries status and progress."""

    id: int | None = Field(default=None, primary_key=True)
    subset_id: int = Field(sa_column=Column(Integer, ForeignKey("subset.id", ondelete="CASCADE"), index=True,
                                            nullable=False))
    job_id: int = Field(sa_column=Column(Integer, ForeignKey("job.id"), index=True, nullable=False))
    experiment_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey(
        "experiment.id", ondelete="CASCADE"), index=True))
    model: str
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False),
                                     description="The full validated TrainingSettings")
    seed: int
    eval_pool_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("pool.id",
                                                                                        ondelete="SET NULL")))
    adapter_path: str | None = Field(default=None, description="The saved LoRA adapter directory")
    prompt_example: str | None = Field(default=None, sa_column=Column(Text),
                                       description="The first training prompt as the worker rendered it (the "
                                                   "probe's template and chat-template options)")
    library_versions: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    created_by_id: int | None = created_by_field()


class RunMetric(SQLModel, table=True):
    """One logged value: TRL's logs as they arrive, plus learnable_share (1 - frac_reward_zero_std)."""

    __tablename__ = "run_metric"
    run_id: int = Field(sa_column=Column(Integer, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True))
    step: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    key: str = Field(sa_column=Column(String(200), primary_key=True))
    value: float = Field(sa_column=Column(Float, nullable=False))


class AdapterProbe(SQLModel, table=True):
    """A probe of a run's trained policy (its base model with the run's LoRA adapter), and the probe of the base
    model it is compared with: the run's subset (scope "training", against the probe the subset was picked
    from) or its evaluation pool ("evaluation", against a base probe of that pool with the same settings)."""

    __tablename__ = "adapter_probe"
    probe_id: int = Field(sa_column=Column(Integer, ForeignKey("probe.id", ondelete="CASCADE"), primary_key=True))
    run_id: int = Field(sa_column=Column(Integer, ForeignKey("run.id", ondelete="CASCADE"), index=True,
                                         nullable=False))
    baseline_probe_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey(
        "probe.id", ondelete="SET NULL")))
    scope: str = Field(description="training or evaluation")
