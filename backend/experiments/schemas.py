from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field

from backend.curation.strategies import STRATEGIES
from backend.params import INT32_MAX, BodyId
from backend.probes.tables import Probe
from backend.runs.schemas import RunRead, TierGain
from backend.runs.settings import PRESETS
from backend.subsets.schemas import BudgetIn

DEFAULT_STRATEGIES = ["hard", "easy", "medium", "random", "base_wrong", "learnable"]


class ExperimentCreate(BaseModel):
    probe_id: BodyId(Probe, "Probe")
    budget: BudgetIn
    # The schema states the allowed values; the service checks them with messages naming the way out.
    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_STRATEGIES),
                                  description="One subset and one run per strategy, all at the same N",
                                  json_schema_extra={"items": {"type": "string", "enum": list(STRATEGIES)},
                                                     "minItems": 1, "uniqueItems": True})
    name: str | None = None
    preset: str | None = Field(None, description="paper or quick_cpu; settings override it field by field",
                               json_schema_extra={"enum": [*PRESETS, None]})
    settings: dict[str, Any] = Field(default_factory=dict, description="TrainingSettings shared by every run")
    allow_other_model: bool = Field(False, description="Train settings.model although the probe used another model "
                                                       "(the difficulty forecast then does not apply)")
    seeds: list[Annotated[int, Field(ge=0, le=INT32_MAX)]] | None = Field(
        None, min_length=1, max_length=10,
        description="Repeat every strategy once per seed (the seed breaks the subset's ties and seeds training), "
                    "so the comparison shows each strategy's mean with a 95% interval; default: settings.seed once")
    band_low: float = Field(0.1, ge=0, le=1, description="band strategy: lowest pass rate kept")
    band_high: float = Field(0.9, ge=0, le=1, description="band strategy: highest pass rate kept")


class ExperimentRead(BaseModel):
    created_by: str | None = Field(None, description="The name of the user who created it (None: the system, "
                                                      "or before users existed)")
    id: int
    name: str
    probe_id: int
    pool_id: int
    budget: dict[str, Any]
    n: int
    strategies: list[str]
    seeds: list[int] = Field(description="The seeds each strategy ran with")
    settings: dict[str, Any]
    probe_model: str | None = Field(description="The model the probe was probed with")
    forecast_applies: bool = Field(description="False when the runs train another model or grade otherwise than "
                                               "the probe, so its difficulty forecast does not describe them")
    forecast_caveats: list[str]
    status: str
    created_at: datetime
    runs: list[RunRead]


class FitRead(BaseModel):
    slope: float | None
    intercept: float | None
    r2: float | None
    n_points: int
    r2_interval: tuple[float, float] | None = Field(None, description="95% bootstrap interval of R² (≥ 3 points)")
    slope_interval: tuple[float, float] | None = Field(None, description="95% bootstrap interval of the slope")


_PREDICTED = ("The subset's predicted learnable share at step 0, recorded when it was frozen (before training moves "
              "pass rates, so not the same quantity as the measured mean over steps); None for label-free subsets")
_PREDICTED_BOUND = ("95% posterior interval of the predicted learnable share at step 0 ({}); None for label-free "
                    "subsets and for subsets frozen before the interval was recorded")


_WILSON = "95% Wilson interval of the {} evaluation accuracy"


class CompareRow(BaseModel):
    run_id: int
    experiment_id: int | None
    strategy: str
    status: str
    n: int
    base_accuracy: float | None
    final_accuracy: float | None
    gain: float | None
    best_accuracy: float | None = Field(None, description="The highest evaluated accuracy after step 0")
    base_accuracy_interval: tuple[float, float] | None = Field(None, description=_WILSON.format("base"))
    final_accuracy_interval: tuple[float, float] | None = Field(None, description=_WILSON.format("final"))
    eval_samples: int | None = Field(None, description="Held-out prompts behind the final accuracy")
    gain_interval: tuple[float, float] | None = Field(
        None, description="95% interval of the gain (Newcombe's hybrid score interval; conservative, as if base "
                          "and final were evaluated on different prompts)")
    gain_beyond_noise: bool | None = Field(None, description="The gain's interval excludes 0")
    within_noise_of_best: bool | None = Field(
        None, description="The 95% interval of this run's final accuracy minus the best run's contains 0: it cannot "
                          "be told apart from the best strategy on this evaluation set (true for the best itself)")
    steps_to_95: int | None = Field(
        None, description="First evaluated step whose accuracy reached 95% of the best final accuracy among the "
                          "experiment's runs (the resolution is eval_every); null if it never did")
    steps_share_of_all: float | None = Field(
        None, description="steps_to_95 as a share of the `all` run's (the full-data baseline, when the experiment has "
                          "one): the second paper's \"reached 95% in ~45% of the steps\"")
    learnable_pct: float | None
    predicted_learnable_share: float | None = Field(description=_PREDICTED)
    predicted_learnable_share_low: float | None = Field(description=_PREDICTED_BOUND.format("lower end"))
    predicted_learnable_share_high: float | None = Field(description=_PREDICTED_BOUND.format("upper end"))
    measured_learnable_share: float | None = Field(description="Measured share of GRPO groups with mixed rewards, "
                                                               "mean over the run's steps")
    learnable_share_error: float | None = Field(
        None, description="Measured minus predicted learnable share: how far the forecast was off for this run")
    ood: dict[str, float]
    ood_base: dict[str, float]
    subset_id: int
    seed: int
    settings: dict[str, Any]
    library_versions: dict[str, str]
    cost: dict[str, Any] | None = Field(
        None, description="labels and label_cost (× the money budget's cost per prompt, else the pool's cost per "
                          "label); probe_samples, probe_tokens_at_most and probe_seconds (0 for random and all, "
                          "which pick without the probe); training_seconds (sum of step times); compute_hours; "
                          "device; gain_per_label_cost and gain_per_compute_hour")


class StrategySummary(BaseModel):
    """A strategy's runs over seeds: means with 95% t intervals (null intervals with a single run)."""

    strategy: str
    runs: int = Field(description="Succeeded runs, one per seed")
    final_accuracy: float | None
    final_accuracy_interval: tuple[float, float] | None
    gain: float | None
    gain_interval: tuple[float, float] | None
    learnable_pct: float | None
    learnable_pct_interval: tuple[float, float] | None
    predicted_learnable_share: float | None = Field(description="Mean over the runs' subsets")
    measured_learnable_share: float | None = Field(description="Mean over the runs")


class Comparison(BaseModel):
    experiment_id: int
    figures: dict[str, dict]
    fit: FitRead
    table: list[CompareRow]
    strategies: list[StrategySummary] = Field(
        default_factory=list, description="Per strategy, its runs over seeds summarised (means and 95% intervals)")
    scatter_runs: list[int] = Field(description="Runs in the scatter: this pool's succeeded runs with the same "
                                                "evaluation pool, from this and earlier experiments")


class StrategyCapacity(BaseModel):
    strategy: str
    runs: int = Field(description="Re-probed runs averaged (one per seed)")
    tiers: list[TierGain]


class Capacity(BaseModel):
    """Pass rates are the probe's (k samples at its temperature) on the evaluation pool, before (base model) and
    after (the run's adapter), by each prompt's tier under the base model."""

    strategies: list[StrategyCapacity]
    pending: int = Field(description="Re-probes of the evaluation pool still running")
    figure: dict | None
