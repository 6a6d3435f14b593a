from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from backend.curation.grading import GradingPolicy
from backend.jobs.schemas import JobRead
from backend.params import INT32_MAX, BodyId
from backend.pools.demo import DEMO_TEMPLATE
from backend.pools.tables import Pool
from backend.prompting import PAPER_TEMPLATE
from backend.settings import DEFAULT_MODEL

# Hard Examples Are All You Need probed with k = 10 at temperature 1.0 (top-p 1: our engines never truncate),
# 250 new tokens, and counted only the last \boxed{} answer, exactly matched (docs/paper-protocol.md).
PROBE_PRESETS: dict[str, dict[str, Any]] = {
    # One user turn ending "Put your final answer within \boxed{}." (for a choice pool such as BBH's, "\boxed{(X)}").
    "paper": {"k": 10, "temperature": 1.0, "max_new_tokens": 250, "template": PAPER_TEMPLATE,
              "grading_policy": "strict"},
    # The demo pool on the embedded model (backend.pools.demo): its answers are a few tokens, and at 0.7 the
    # 135M model's samples are less noisy than at 1.0 while most prompts stay between never and always solved.
    "demo": {"k": 8, "temperature": 0.7, "max_new_tokens": 16, "template": DEMO_TEMPLATE, "grading_policy": "lenient"},
}


class AdaptiveCreate(BaseModel):
    """Sample in rounds and stop sampling a prompt once more samples are unlikely to change the decision
    (backend.curation.adaptive). Needs gold answers: the rule reads pass rates."""

    strategy: Literal["hard", "easy", "medium", "learnable", "band"] | None = Field(
        None, description="The decision: the strategy you will pick the subset with")
    count: int | None = Field(None, ge=1, le=INT32_MAX, description="The decision's budget N, in prompts")
    fraction: float | None = Field(None, gt=0, le=1, description="Or N as a fraction of the pool")
    band: tuple[float, float] = Field((0.1, 0.9), description="Pass-rate band (lo, hi) for the band strategy")
    group_size: int = Field(8, ge=2, le=64, description="The GRPO group size G (learnable ranks by it)")
    seed: int = Field(0, ge=0, le=INT32_MAX,
                      description="The seed the subset will break ties with (a subset's default is 0)")
    tolerance: float = Field(0.02, gt=0, le=0.5, description="Expected share of picks allowed to differ from "
                                                             "those of a probe with k samples of every prompt")
    max_width: float | None = Field(None, gt=0, le=1, description="Also stop a prompt once its 95% Wilson "
                                                                  "interval is at most this wide")
    first_round: int = Field(2, ge=1, le=64, description="Samples of every prompt in the first round (at most k)")
    round_size: int = Field(2, ge=1, le=64, description="Samples added to each open prompt per later round")

    @model_validator(mode="after")
    def _needs_a_rule(self) -> "AdaptiveCreate":
        if self.strategy is None and (self.count is not None or self.fraction is not None):
            raise ValueError("count and fraction are the budget of a decision: give a strategy as well")
        if self.strategy is None and self.max_width is None:
            raise ValueError("adaptive probing needs a decision (strategy with count or fraction), a max_width, "
                             "or both")
        if self.strategy is not None and (self.count is None) == (self.fraction is None):
            raise ValueError(f"the {self.strategy} decision needs its budget: give exactly one of count or "
                             "fraction")
        lo, hi = self.band
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"band must be two pass rates lo <= hi within [0, 1], got {list(self.band)}")
        return self


class ProbeCreate(BaseModel):
    pool_id: BodyId(Pool, "Pool")
    model: str = Field(DEFAULT_MODEL, description="A name from GET /api/models or a local checkpoint directory")
    k: int = Field(8, ge=1, le=64, description="Samples per prompt, 1 to 64")
    temperature: float = Field(1.0, ge=0, le=2, description="Sampling temperature, 0 to 2")
    max_new_tokens: int = Field(256, ge=1, le=4096, description="New tokens per sample, 1 to 4096")
    template: str | None = Field(
        None, description="Prompt template containing {prompt}; default: the model's chat template with an "
                          "instruction to answer in \\boxed{}")
    seed: int = Field(0, ge=0, le=INT32_MAX,
                      description="Seed for sampling; with the same settings a probe is reproducible")
    chat_template_options: dict[str, Any] | None = Field(
        None, description='Keyword arguments for the model\'s chat template, e.g. {"enable_thinking": false} for '
                          "Qwen3; keys are identifiers, values text, numbers, true/false or null. Training and "
                          "evaluation on this probe's subsets use them too.")
    grading_policy: GradingPolicy = Field(
        "lenient", description="strict: only the last \\boxed{} answer, matched exactly (the paper); lenient: "
                               "also unboxed final answers. Training rewards and evaluation use the probe's policy.")
    preset: Literal["paper", "demo"] | None = Field(
        None, description="paper: k = 10, temperature 1.0, 250 new tokens, one user turn ending \"Put your final "
                          "answer within \\boxed{}.\" (\\boxed{(X)} for a choice pool), strict grading; demo "
                          "(the demo pool on the embedded model): k = 8, temperature 0.7, 16 new tokens, a terse "
                          "ChatML template, lenient grading; fields given explicitly override it")

    adaptive: AdaptiveCreate | None = Field(
        None, description="Sample in rounds and stop a prompt early once its decision is settled; default: k "
                          "samples of every prompt")

    @model_validator(mode="after")
    def _apply_preset(self) -> "ProbeCreate":
        for name, value in PROBE_PRESETS.get(self.preset or "", {}).items():
            if name not in self.model_fields_set:
                setattr(self, name, value)
        if self.adaptive is not None and self.adaptive.first_round > self.k:
            raise ValueError(f"adaptive.first_round ({self.adaptive.first_round}) exceeds k ({self.k}): the first "
                             "round draws at most k samples")
        return self


class ProbeRead(BaseModel):
    created_by: str | None = Field(None, description="The name of the user who created it (None: the system, "
                                                      "or before users existed)")
    id: int
    pool_id: int
    job_id: int
    model: str
    k: int
    temperature: float
    max_new_tokens: int
    template: str | None
    chat_template_options: dict[str, Any] | None
    grading_policy: str
    seed: int
    label_free: bool = Field(description="Difficulty is answer agreement: some prompt had no gold answer. Labels "
                                         "imported later re-grade the samples, and once every prompt has one it "
                                         "becomes false")
    graded_prompts: int = Field(description="Prompts with a pass rate (those with a gold answer)")
    scores_revision: int = Field(description="How many times labels re-graded this probe's scores")
    prompt_count: int
    shard_size: int
    samples_per_second: float | None
    adaptive: dict[str, Any] | None = Field(description="The stop rule of an adaptive probe (N resolved); null: k "
                                                        "samples of every prompt")
    samples_drawn: int | None = Field(description="Samples drawn, once the probe succeeded")
    adapter_run_id: int | None = Field(description="The run whose trained LoRA adapter this probe applied (a "
                                                   "re-probe, POST /runs/{id}/reprobe); null: the model itself")
    samples_saved: float | None = Field(description="Share of the prompt_count x k samples an adaptive probe did "
                                                    "not draw")
    created_at: datetime
    job: JobRead


class ScoreRead(BaseModel):
    correct_count: int | None
    k: int
    pass_rate: float | None
    wilson_low: float | None
    wilson_high: float | None
    agreement: float
    majority_answer: str | None
    base_wrong: bool
    difficulty: float


class SampleRead(BaseModel):
    sample_index: int
    completion: str
    extracted_answer: str | None
    correct: bool | None


class ProbePromptRead(BaseModel):
    id: int
    external_id: str
    text: str
    answer: str | None
    gold: str | None


class PromptSamples(BaseModel):
    prompt: ProbePromptRead
    score: ScoreRead | None
    samples: list[SampleRead]


class DifficultyRead(BaseModel):
    probe_id: int
    label_free: bool
    metric: str = Field(description="pass_rate with gold answers, agreement in label-free mode")
    partial: bool = Field(description="The probe is still running: these are the prompts scored so far "
                                      "(summary.count of prompt_count)")
    prompt_count: int
    histogram: dict
    summary: dict
    figure: dict


class LabelErrorExample(BaseModel):
    external_id: str
    text: str
    gold: str | None
    majority_answer: str | None
    agreement: float


class FailureBreakdown(BaseModel):
    never_solved: int = Field(description="Prompts no sample of which was correct")
    prompts: dict[str, int] = Field(
        description="Never-solved prompts by kind: label_error (the samples agree, at least 75%, on another answer "
                    "than the gold), no_answer (most samples give no readable answer: none, or cut off at "
                    "max_new_tokens), wrong_answer (the rest)")
    samples: dict[str, int] = Field(description="Their samples: no_answer and wrong_answer")
    max_new_tokens: int
    label_error_examples: list[LabelErrorExample] = Field(description="The likely label errors, most agreed first "
                                                                      "(at most 10)")
