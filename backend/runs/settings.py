"""Training settings: defaults, bounds, presets and TRL's rules, checked before a run is submitted.

Pure: no torch, no TRL import, so the API validates a run without the ML stack. The batch rules
mirror trl 1.x ``GRPOConfig.__post_init__`` and ``GRPOTrainer.__init__``:

- ``num_generations >= 2`` (advantages need a group);
- the generation batch must hold whole prompt groups: ``generation_batch_size % num_generations == 0``.
  We train on one device with ``per_device_train_batch_size = batch_size`` completions and one
  gradient step per generation batch, so the generation batch is ``batch_size``;
- ``lm_head`` may not carry a LoRA adapter (its weight is used directly for log-probabilities).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from backend.curation.grading import GradingPolicy
from backend.params import INT32_MAX

# Pool ids as the pool table holds them (32-bit, see backend.params): refused here, not by the database driver.
PoolIdValue = Field(ge=1, le=INT32_MAX)


class TrainingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, description="Model to train; default (null): the model the subset's probe "
                                                "was probed with, whose difficulty scores chose the subset")
    lora_rank: int = Field(32, ge=1, le=512, description="LoRA rank r")
    lora_alpha: int = Field(32, ge=1, le=1024, description="LoRA alpha")
    lora_target_modules: str | list[str] = Field(
        "all-linear", description='"all-linear" or a list of module names (never lm_head)')
    learning_rate: float = Field(5e-6, gt=0, le=1e-2)
    lr_scheduler_type: Literal["linear", "cosine", "constant", "constant_with_warmup"] = Field(
        "linear", description="Learning-rate schedule over max_steps")
    warmup_ratio: float = Field(0.0, ge=0, le=0.5, description="Share of the steps the learning rate warms up over")
    weight_decay: float = Field(0.0, ge=0, le=1.0, description="AdamW weight decay")
    adam_beta2: float = Field(0.999, gt=0, lt=1, description="AdamW β2")
    max_grad_norm: float = Field(1.0, gt=0, le=100, description="Gradient clipping norm")
    max_steps: int = Field(1000, ge=1, le=100_000, description="Optimizer steps")
    num_generations: int = Field(8, ge=2, le=64, description="Group size G: completions per prompt")
    batch_size: int = Field(8, ge=2, le=4096, description="Completions per optimizer step "
                            "(prompts per step × num_generations)")
    max_completion_length: int = Field(250, ge=1, le=8192, description="New tokens per completion")
    temperature: float = Field(1.0, gt=0, le=2.0)
    beta: float = Field(0.0, ge=0, le=1.0, description="KL coefficient (0: no reference model)")
    seed: int = Field(0, ge=0, le=2**31 - 1)
    eval_every: int = Field(0, ge=0, le=100_000, description="Evaluate every N steps (0: only at step 0 and the end)")
    eval_pool_id: Annotated[int, PoolIdValue] | None = Field(None, description="Held-out pool for evaluation")
    eval_samples: int = Field(100, ge=1, le=100_000, description="Prompts of the eval pool used")
    eval_temperature: float = Field(0.0, ge=0, le=2.0, description="0: greedy evaluation; above 0: one sample per "
                                                                   "prompt at this temperature (the paper: 1.0)")
    ood_pool_ids: list[Annotated[int, PoolIdValue]] = Field(default_factory=list, max_length=10,
                                    description="Out-of-distribution pools evaluated with pass@k after training")
    ood_k: int = Field(4, ge=1, le=64, description="Samples per OOD prompt for pass@k")
    ood_samples: int = Field(50, ge=1, le=10_000, description="Prompts of each OOD pool used")
    ood_max_new_tokens: int | None = Field(None, ge=1, le=8192, description="New tokens per OOD sample; default "
                                                                            "(null): max_completion_length")
    load_in_4bit: bool = Field(False, description="Train LoRA on a 4-bit (NF4, bitsandbytes) base model, as the paper "
                                                  "did; needs a CUDA GPU and bitsandbytes, and where either is missing "
                                                  "the base trains in bfloat16 or float32 and the run says so "
                                                  "(library_versions.base_weights)")
    grading_policy: GradingPolicy | None = Field(
        None, description="How rewards and evaluation are graded: strict (last \\boxed{} only, exact) or lenient; "
                          "default (null): the probe's policy, the one its pass rates were measured with")

    @field_validator("lora_target_modules", mode="before")
    @classmethod
    def _module_list(cls, value: Any) -> Any:
        # PEFT reads a plain string as one regular expression over full names, so "q_proj,v_proj" or
        # "q_proj" would match nothing: anything but "all-linear" becomes a list of names.
        if isinstance(value, str) and value.strip() != "all-linear":
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size // self.num_generations


PRESETS: dict[str, dict[str, Any]] = {
    # Hard Examples Are All You Need (Pikus, Tiwari, Ye, 2025), its training protocol: LoRA r = α = 32 on the
    # attention and MLP projections, lr 5e-6 cosine with 10% warmup, weight decay 0.1, β2 0.99, gradient
    # clipping 0.1, G = 8 with one prompt per step, 250 tokens, 1000 steps, a binary reward for the last
    # \boxed{} answer only (docs/paper-protocol.md). No preset names a model: a run trains its probe's.
    "paper": {"lora_rank": 32, "lora_alpha": 32,
              "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
              "learning_rate": 5e-6, "lr_scheduler_type": "cosine", "warmup_ratio": 0.1, "weight_decay": 0.1,
              "adam_beta2": 0.99, "max_grad_norm": 0.1,
              "num_generations": 8, "batch_size": 8, "max_completion_length": 250, "temperature": 1.0,
              "max_steps": 1000, "beta": 0.0, "grading_policy": "strict", "eval_samples": 100_000,
              "eval_temperature": 1.0, "ood_k": 8, "ood_max_new_tokens": 512, "load_in_4bit": True},
    # The demo experiment (the demo pool on the embedded model, backend.pools.demo): four runs in about 15
    # minutes on two CPU cores. Answers are a few tokens; the probe's temperature (0.7) keeps its forecast
    # valid. lr 2e-4: a subset with signal in most steps learns the terse answer format within ~6 steps,
    # one with signal in a third of them has not after 20. At 5e-4 every strategy learned it and the
    # gains were alike (docs/benchmarks.md).
    "demo_cpu": {"lora_rank": 8, "lora_alpha": 16, "lora_target_modules": "all-linear", "learning_rate": 2e-4,
                 "num_generations": 8, "batch_size": 8, "max_completion_length": 16, "temperature": 0.7,
                 "max_steps": 20, "beta": 0.0, "eval_every": 0},
    # For the default 135M model: a few dozen steps in minutes on a laptop CPU.
    "quick_cpu": {"lora_rank": 8, "lora_alpha": 16, "lora_target_modules": "all-linear",
                  "learning_rate": 1e-4, "num_generations": 4, "batch_size": 4,
                  "max_completion_length": 48, "temperature": 1.0, "max_steps": 30, "beta": 0.0,
                  "eval_every": 0},
}


def preset(name: str, **overrides: Any) -> TrainingSettings:
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}")
    return TrainingSettings(**{**PRESETS[name], **overrides})


def _bound_words(error: dict) -> str:
    field = ".".join(str(part) for part in error["loc"]) or "settings"
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if field in TrainingSettings.model_fields:
        info = TrainingSettings.model_fields[field]
        lows = [m for m in info.metadata if hasattr(m, "ge") or hasattr(m, "gt")]
        highs = [m for m in info.metadata if hasattr(m, "le") or hasattr(m, "lt")]
        if kind in {"greater_than_equal", "greater_than", "less_than_equal", "less_than"}:
            low = next((f"{'>' if hasattr(m, 'gt') else '≥'} {getattr(m, 'gt', getattr(m, 'ge', None))}"
                        for m in lows), None)
            high = next((f"≤ {getattr(m, 'le', getattr(m, 'lt', None))}" for m in highs), None)
            allowed = " and ".join(filter(None, [low, high]))
            return f"{field} = {error.get('input')!r} is out of range; allowed: {allowed}."
    if kind == "extra_forbidden":
        return f"{field} is not a training setting; known settings: {', '.join(TrainingSettings.model_fields)}."
    return f"{field}: {error['msg']}" + (f" ({ctx})" if ctx and kind not in {"int_parsing", "float_parsing"} else "")


def parse_training_settings(raw: dict[str, Any] | TrainingSettings) -> tuple[TrainingSettings | None, list[str]]:
    """Validate field by field, then the cross-field rules. ``(settings, [])`` or ``(None, problems)``."""
    if isinstance(raw, TrainingSettings):
        settings = raw
    else:
        try:
            settings = TrainingSettings(**raw)
        except ValidationError as exc:
            return None, [_bound_words(error) for error in exc.errors()]
    problems = check_training_settings(settings)
    return (None, problems) if problems else (settings, [])


def check_training_settings(settings: TrainingSettings) -> list[str]:
    """TRL's rules (and ours) in words; an empty list means the settings can be submitted."""
    problems: list[str] = []
    g = settings.num_generations
    if g < 2:
        problems.append(f"num_generations = {g}: GRPO needs at least 2 generations per prompt to compute "
                        "advantages (the group's rewards must be compared).")
    elif settings.batch_size % g != 0:
        problems.append(f"batch_size ({settings.batch_size} completions per step) must be divisible by "
                        f"num_generations ({g}): every prompt's group of {g} completions must be complete in one "
                        f"batch. Use a multiple of {g}, for example {max(g, settings.batch_size // g * g)}.")
    names = [] if settings.lora_target_modules == "all-linear" else list(settings.lora_target_modules)
    if settings.lora_target_modules != "all-linear" and not names:
        problems.append('lora_target_modules is empty; use "all-linear" or a list of module names.')
    if "lm_head" in names:
        problems.append("lora_target_modules may not include lm_head: TRL computes log-probabilities from "
                        "lm_head.weight directly, so an adapter there would never train.")
    if settings.eval_every > 0 and settings.eval_pool_id is None:  # with a pool and 0: start and end only
        problems.append("eval_every is set but eval_pool_id is not: choose a held-out pool to evaluate on, "
                        "or set eval_every to 0.")
    if settings.eval_every > settings.max_steps:
        problems.append(f"eval_every ({settings.eval_every}) is larger than max_steps ({settings.max_steps}); "
                        "evaluation would only run at step 0.")
    if len(set(settings.ood_pool_ids)) != len(settings.ood_pool_ids):
        problems.append(f"ood_pool_ids lists a pool twice ({settings.ood_pool_ids}); list each pool once.")
    return problems


def grpo_config_kwargs(settings: TrainingSettings, *, cuda: bool, bf16: bool, output_dir: str) -> dict[str, Any]:
    """The ``trl.GRPOConfig`` arguments a run trains with (also served as the run's config download)."""
    return {
        "output_dir": output_dir,
        "per_device_train_batch_size": settings.batch_size,  # completions; one generation batch per step
        "gradient_accumulation_steps": 1,
        "num_generations": settings.num_generations,
        "max_completion_length": settings.max_completion_length,
        "temperature": settings.temperature,
        "beta": settings.beta,
        "learning_rate": settings.learning_rate,
        "lr_scheduler_type": settings.lr_scheduler_type,
        "warmup_steps": settings.warmup_ratio,  # transformers 5: a float below 1 is a share of the steps
        "weight_decay": settings.weight_decay,
        "adam_beta2": settings.adam_beta2,
        "max_grad_norm": settings.max_grad_norm,
        "max_steps": settings.max_steps,
        "seed": settings.seed,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "use_cpu": not cuda,
        "bf16": bf16,
        "gradient_checkpointing": cuda,  # on the CPU memory is plenty and recomputation only costs time
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }


def lora_config_kwargs(settings: TrainingSettings) -> dict[str, Any]:
    """The ``peft.LoraConfig`` arguments of a run."""
    return {"r": settings.lora_rank, "lora_alpha": settings.lora_alpha,
            "target_modules": settings.lora_target_modules, "lora_dropout": 0.0, "task_type": "CAUSAL_LM"}
