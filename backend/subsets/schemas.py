from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from backend.curation.strategies import STRATEGIES
from backend.params import INT32_MAX, BodyId
from backend.probes.tables import Probe

Strategy = Literal[STRATEGIES]  # type: ignore[valid-type]


class BudgetIn(BaseModel):
    kind: Literal["count", "fraction", "money"]
    value: float = Field(description="A count of prompts, a fraction of the pool in (0, 1], or an amount of money")
    cost_per_prompt: float | None = Field(None, description="Money per labeled prompt; needed with kind=money")


class SelectionRequest(BaseModel):
    probe_id: BodyId(Probe, "Probe")
    strategy: Strategy
    budget: BudgetIn
    group_size: int = Field(8, ge=2, le=64, description="GRPO generations per prompt (G), 2 to 64")
    band_low: float = Field(0.1, ge=0, le=1, description="band strategy: lowest pass rate kept")
    band_high: float = Field(0.9, ge=0, le=1, description="band strategy: highest pass rate kept")
    seed: int = Field(0, ge=0, le=INT32_MAX, description="Seed for tie-breaking and random picks")


class SubsetCreate(SelectionRequest):
    name: str | None = Field(None, description="Default: '<strategy> N=<n> (probe <id>)'")


DifficultyBasis = Literal["pass_rate", "agreement"]
_BASIS = ("What difficulty is 1 minus: pass_rate (graded against gold answers) or agreement (label-free: share "
          "of samples giving the most common answer, not a success rate)")
_SHARE = ("Predicted learnable share at step 0: the expected share of GRPO groups of G generations with mixed "
          "rewards on the probed model, before training moves its pass rates (beta-binomial posterior per prompt, "
          "prior fitted to the probe). None for label-free probes: agreement is not a success rate")
_SHARE_BOUND = "95% posterior interval of the predicted learnable share at step 0 ({}); None for label-free probes"
_FROZEN_BOUND = ("95% posterior interval of the predicted learnable share at step 0 ({}), recorded when the subset "
                 "was frozen; None for label-free subsets and for subsets frozen before the interval was recorded")


class ComparisonRow(BaseModel):
    strategy: str
    n_picked: int
    predicted_learnable_share: float | None = Field(description=_SHARE)
    predicted_learnable_share_low: float | None = Field(description=_SHARE_BOUND.format("lower end"))
    predicted_learnable_share_high: float | None = Field(description=_SHARE_BOUND.format("upper end"))
    mean_pass_rate: float | None = Field(description="None for label-free probes and for an empty pick")
    mean_agreement: float | None = Field(description="Label-free probes only: mean agreement of the pick")
    mean_difficulty: float | None
    overlap_with_hard: float | None


class PickedPrompt(BaseModel):
    id: int
    external_id: str
    text: str
    answer: str | None
    difficulty: float
    pass_rate: float | None = Field(description="None for label-free probes")
    agreement: float | None = Field(description="Label-free probes only (difficulty = 1 - agreement)")


class RegimeAdvice(BaseModel):
    regime: Literal["beyond_reach", "within_reach", "saturated"]
    profile: str = Field(description="The difficulty profile and the forecasts the regime is read from")
    prediction: str = Field(description="What the papers would predict here")
    test: str = Field(description="The experiment that would test the prediction")


class SelectionPreview(BaseModel):
    strategy: str
    n: int
    requested: int
    clamped: bool
    warning: str | None
    pool_size: int
    difficulty_basis: DifficultyBasis = Field(description=_BASIS)
    caveat: str | None = Field(description="Why label-free numbers read differently, and what labeling adds")
    predicted_learnable_share: float | None = Field(description=_SHARE)
    predicted_learnable_share_low: float | None = Field(description=_SHARE_BOUND.format("lower end"))
    predicted_learnable_share_high: float | None = Field(description=_SHARE_BOUND.format("upper end"))
    mean_pass_rate: float | None = Field(description="None for label-free probes and for an empty pick")
    mean_agreement: float | None = Field(description="Label-free probes only: mean agreement of the pick")
    figure: dict
    comparison: list[ComparisonRow] = Field(
        description="Every strategy the probe supports at the same N (label-free: no band or learnable)")
    advice: RegimeAdvice | None = Field(
        None, description="The regime the pool is in for this model and what both papers predict at this budget; "
                          "null for label-free probes")
    prompts: list[PickedPrompt]


class SubsetRead(BaseModel):
    created_by: str | None = Field(None, description="The name of the user who created it (None: the system, "
                                                      "or before users existed)")
    id: int
    name: str
    probe_id: int
    pool_id: int
    strategy: str
    budget_kind: str
    budget_value: float
    cost_per_prompt: float | None
    n_requested: int
    n: int
    seed: int
    group_size: int
    band_low: float | None
    band_high: float | None
    difficulty_basis: DifficultyBasis = Field(description=_BASIS)
    predicted_learnable_share: float | None = Field(description=_SHARE + " (recorded when the subset was frozen)")
    predicted_learnable_share_low: float | None = Field(description=_FROZEN_BOUND.format("lower end"))
    predicted_learnable_share_high: float | None = Field(description=_FROZEN_BOUND.format("upper end"))
    mean_pass_rate: float | None
    created_at: datetime
