from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import Session

from backend.jobs.schemas import JobRead
from backend.runs.tables import Run
from backend.subsets.tables import Subset


class RunCreate(BaseModel):
    subset_id: int
    preset: str | None = Field(None, description="paper or quick_cpu; settings override it field by field")
    settings: dict[str, Any] = Field(default_factory=dict, description="TrainingSettings fields to set")


class RunRead(BaseModel):
    id: int
    subset_id: int
    subset_name: str | None
    experiment_id: int | None
    strategy: str | None
    model: str
    settings: dict[str, Any]
    seed: int
    eval_pool_id: int | None
    library_versions: dict[str, str]
    adapter_available: bool
    created_at: datetime
    job: JobRead

    @classmethod
    def of(cls, session: Session, run: Run) -> "RunRead":
        from backend.runs.service import run_job

        subset = session.get(Subset, run.subset_id)
        return cls(id=run.id, subset_id=run.subset_id, subset_name=subset.name if subset else None,
                   experiment_id=run.experiment_id, strategy=subset.strategy if subset else None, model=run.model,
                   settings=run.settings, seed=run.seed, eval_pool_id=run.eval_pool_id,
                   library_versions=run.library_versions, adapter_available=run.adapter_path is not None,
                   created_at=run.created_at, job=JobRead.of(run_job(session, run)))


class MetricSeries(BaseModel):
    steps: list[int]
    values: list[float]


class RunMetrics(BaseModel):
    run_id: int
    keys: list[str]
    series: dict[str, MetricSeries]
