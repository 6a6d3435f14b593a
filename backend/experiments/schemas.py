from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from backend.runs.schemas import RunRead
from backend.subsets.schemas import BudgetIn

DEFAULT_STRATEGIES = ["hard", "easy", "medium", "random", "base_wrong", "learnable"]


class ExperimentCreate(BaseModel):
    probe_id: int
    budget: BudgetIn
    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_STRATEGIES),
                                  description="One subset and one run per strategy, all at the same N")
    name: str | None = None
    preset: str | None = Field(None, description="paper or quick_cpu; settings override it field by field")
    settings: dict[str, Any] = Field(default_factory=dict, description="TrainingSettings shared by every run")
    band_low: float = 0.1
    band_high: float = 0.9
    allow_other_model: bool = Field(False, description="Train settings.model although the probe used another model "
                                                       "(the difficulty forecast then does not apply)")


class ExperimentRead(BaseModel):
    id: int
    name: str
    probe_id: int
    pool_id: int
    budget: dict[str, Any]
    n: int
    strategies: list[str]
    settings: dict[str, Any]
    status: str
    created_at: datetime
    probe_model: str | None = Field(description="The model the probe was probed with")
    forecast_applies: bool = Field(description="False when the runs train another model or grade otherwise than "
                                               "the probe, so its difficulty forecast does not describe them")
    forecast_caveats: list[str]
    runs: list[RunRead]


class FitRead(BaseModel):
    slope: float | None
    intercept: float | None
    r2: float | None
    n_points: int


class CompareRow(BaseModel):
    run_id: int
    experiment_id: int | None
    strategy: str
    status: str
    n: int
    base_accuracy: float | None
    final_accuracy: float | None
    gain: float | None
    learnable_pct: float | None
    predicted_learnable_share: float
    measured_learnable_share: float | None
    ood: dict[str, float]
    ood_base: dict[str, float]
    subset_id: int
    seed: int
    settings: dict[str, Any]
    library_versions: dict[str, str]


class Comparison(BaseModel):
    experiment_id: int
    figures: dict[str, dict]
    fit: FitRead
    table: list[CompareRow]
    scatter_runs: list[int] = Field(description="Runs in the scatter: this pool's succeeded runs with the same "
                                                "evaluation pool, from this and earlier experiments")
