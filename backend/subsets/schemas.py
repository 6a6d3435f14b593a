from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from backend.curation.strategies import STRATEGIES

Strategy = Literal[STRATEGIES]  # type: ignore[valid-type]


class BudgetIn(BaseModel):
    kind: Literal["count", "fraction", "money"]
    value: float = Field(description="A count of prompts, a fraction of the pool in (0, 1], or an amount of money")
    cost_per_prompt: float | None = Field(None, description="Money per labeled prompt; needed with kind=money")


class SelectionRequest(BaseModel):
    probe_id: int
    strategy: Strategy
    budget: BudgetIn
    group_size: int = Field(8, description="GRPO generations per prompt (G), 2 to 64")
    band_low: float = Field(0.1, description="band strategy: lowest pass rate kept")
    band_high: float = Field(0.9, description="band strategy: highest pass rate kept")
    seed: int = Field(0, description="Seed for tie-breaking and random picks")


class SubsetCreate(SelectionRequest):
    name: str | None = Field(None, description="Default: '<strategy> N=<n> (probe <id>)'")


class ComparisonRow(BaseModel):
    strategy: str
    n_picked: int
    predicted_learnable_share: float
    mean_pass_rate: float | None
    mean_difficulty: float | None
    overlap_with_hard: float | None


class PickedPrompt(BaseModel):
    id: int
    external_id: str
    text: str
    answer: str | None
    difficulty: float
    pass_rate: float | None


class SelectionPreview(BaseModel):
    strategy: str
    n: int
    requested: int
    clamped: bool
    warning: str | None
    pool_size: int
    predicted_learnable_share: float
    mean_pass_rate: float | None
    figure: dict
    comparison: list[ComparisonRow]
    prompts: list[PickedPrompt]


class SubsetRead(BaseModel):
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
    predicted_learnable_share: float
    mean_pass_rate: float | None
    created_at: datetime
