"""The GRPO training job as a plain function: ``train_run(run_id)``, or ``python -m worker.training RUN_ID``.

TRL's ``GRPOTrainer`` with a PEFT LoRA config and the binary correctness reward (the pool's grader:
``extract_answer`` + ``is_correct`` against ``parse_gold``, under the run's grading policy, by default the
probe's). Prompts are rendered exactly as the subset's probe rendered them (its template and chat-template
options), for training and for every evaluation, so the policy learns on the input it was probed with.
``MetricsCallback`` writes every logged value to ``run_metric`` as it arrives and stops cleanly on a cancel
request. On success the LoRA adapter is saved under ``<artifacts>/runs/<id>/adapter``.

The job engine (backend.jobs.engine) claims the run's task and calls ``run_training``; the callbacks beat
after each step (progress, the lease, a cancel check). Errors: the engine retries transient ones (the
database went away; training restarts from step 0); an out-of-memory fails the run with advice on which
settings to lower (the same settings would run out again). A run whose worker is lost (killed, hung) is
failed by the reconciler when its lease expires, keeping its logged metrics: training does not resume.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sqlalchemy import delete, update
from sqlmodel import select

from backend.curation.grading import TASK_TYPES, grade, parse_gold
from backend.database import session_scope
from backend.jobs.engine import JobFailure, TaskContext, describe, is_out_of_memory, run_here
from backend.jobs.service import lock_job
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe
from backend.prompting import PromptFormat, without_added_bos
from backend.runs.downloads import run_dir
from backend.runs.settings import TrainingSettings, check_training_settings, grpo_config_kwargs, lora_config_kwargs
from backend.runs.tables import Run, RunMetric
from backend.subsets.export import export_rows
from backend.subsets.service import unlabeled_members
from backend.subsets.tables import Subset

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
LIBRARIES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets")


TrainingFailure = JobFailure  # a final failure whose message is shown to the user as is


@dataclass(frozen=True)
class PromptSet:
    """The first prompts with gold answers of a pool: the evaluation set, or an OOD set for pass@k."""

    pool_id: int
    task_type: str
    questions: tuple[str, ...]
    golds: tuple[str, ...]


@dataclass(frozen=True)
class TrainingWork:
    run_id: int
    settings: TrainingSettings
    task_type: str
    rows: list[dict]
    prompt_format: PromptFormat = PromptFormat()
    grading_policy: str = "lenient"
    evaluation: PromptSet | None = None
    ood: tuple[PromptSet, ...] = ()


def library_versions() -> dict[str, str]:
    """Versions of the training stack, plus the device (and bf16 use), recorded when a run starts."""
    import torch

    found = {"python": sys.version.split()[0]}
    for name in (*LIBRARIES, "bitsandbytes"):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    if torch.cuda.is_available():
        bf16 = " bf16" if torch.cuda.is_bf16_supported() else ""
        found["device"] = f"cuda: {torch.cuda.get_device_name(0)}{bf16}"
    else:
        found["device"] = "cpu"
    return found


# --- entry points ----------------------------------------------------------------------------------


def run_training(ctx: TaskContext) -> str:
    """The kind's run function: train the run named by ctx.args; returns "succeeded", "cancelled" or the
    status the job ended with elsewhere. An out-of-memory becomes a JobFailure with advice."""
    try:
        work = _start(ctx)
        return _fit(ctx, work) if work is not None else "stopped"
    except Exception as exc:
        if is_out_of_memory(exc) and not isinstance(exc, JobFailure):
            raise JobFailure("Training ran out of memory. Lower batch_size or max_completion_length (or "
                             f"num_generations), or use a smaller model. ({describe(exc)})") from exc
        raise


def prepare_training(args: dict) -> None:
    """The kind's prepare function, before the claim: the training stack's imports, and the model's checkpoint
    (found, or downloaded and converted: minutes the first time), so the lease need only outlast a step."""
    import peft  # noqa: F401
    import torch  # noqa: F401
    import trl  # noqa: F401

    from worker.model_store import ensure_checkpoint

    with session_scope(immediate=False) as session:
        run = session.get(Run, args["run_id"])
        model = run.model if run else None
    if model is not None:
        ensure_checkpoint(model)


def train_run(run_id: int) -> str:
    """Train one run in this process (the CLI's --local, tests); returns the job's final status."""
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise JobFailure(f"Run {run_id} does not exist.")
        job_id = run.job_id
    return run_here(job_id)


# --- steps -----------------------------------------------------------------------------------------


def _start(ctx: TaskContext) -> TrainingWork | None:
    """Record the library versions and start from step 0 (a retry replaces what an attempt logged), then read
    what training needs; None when the job was cancelled or ended meanwhile."""
    run_id = ctx.args["run_id"]
    versions = library_versions()  # imports torch: done before any row is locked
    with session_scope() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise TrainingFailure(f"Run {run_id} does not exist (deleted?); nothing to train.")
        run.library_versions = {**versions,
                                 "base_weights": base_weights(TrainingSettings(**run.settings).load_in_4bit)[0]}
        session.add(run)
        session.execute(delete(RunMetric).where(RunMetric.run_id == run_id))
        job = lock_job(session, ctx.job_id)
        job.progress_total = TrainingSettings(**run.settings).max_steps
        job.progress_done = 0
        session.add(job)
    if not ctx.beat(done=0, message=f"loading {run.model} ({run.library_versions['base_weights']})",
                    stopped="before training"):
        return None
    with session_scope() as session:
        return _read_work(session, run_id)


def _read_work(session, run_id: int) -> TrainingWork:
    run = session.get(Run, run_id)
    settings = TrainingSettings(**run.settings)
    problems = check_training_settings(settings)
    if problems:
        raise TrainingFailure("Training settings rejected: " + " ".join(problems))
    subset = session.get(Subset, run.subset_id)
    pool = session.get(Pool, subset.pool_id) if subset else None
    probe = session.get(Probe, subset.probe_id) if subset else None
    if subset is None or pool is None or probe is None:
        raise TrainingFailure(f"Run {run_id}'s subset no longer exists.")
    unlabeled = unlabeled_members(session, subset)
    if unlabeled:
        raise TrainingFailure(f"{unlabeled} of the {subset.n} prompts of subset {subset.id} have no answer (labels "
                              "were undone since launch?); the reward grades completions against gold answers. "
                              "Import their labels and launch again.")
    if pool.task_type not in TASK_TYPES:
        raise TrainingFailure(f"Pool {pool.id} has task type '{pool.task_type}', which cannot be graded; "
                              f"use one of {', '.join(TASK_TYPES)}.")
    rows = [{"prompt": row["prompt"], "answer": row["answer"]}
            for batch in export_rows(session, subset) for row in batch
            if row["answer"] is not None and parse_gold(row["answer"], pool.task_type) is not None]
    if not rows:
        raise TrainingFailure(f"Subset {subset.id} has no prompt with a gradable answer; add answers to its "
                              "pool (an answer column on upload) and freeze the subset again.")
    evaluation = (None if settings.eval_pool_id is None else
                  _prompt_set(session, settings.eval_pool_id, settings.eval_samples, "Evaluation", "eval_pool_id"))
    ood = tuple(_prompt_set(session, pool_id, settings.ood_samples, "Out-of-distribution", "ood_pool_ids")
                for pool_id in settings.ood_pool_ids)
    return TrainingWork(run_id=run_id, settings=settings, task_type=pool.task_type, rows=rows,
                        prompt_format=PromptFormat(probe.template, probe.chat_template_options or {}),
                        grading_policy=settings.grading_policy or probe.grading_policy,
                        evaluation=evaluation, ood=ood)


def _prompt_set(session, pool_id: int, limit: int, role: str, setting: str) -> PromptSet:
    pool = session.get(Pool, pool_id)
    rows = [] if pool is None or pool.task_type not in TASK_TYPES else session.exec(
        select(Prompt.text, Prompt.gold).where(Prompt.pool_id == pool_id, Prompt.gold.is_not(None))
        .order_by(Prompt.position).limit(limit)).all()
    if not rows:
        raise TrainingFailure(f"{role} pool {pool_id} is gone or has no gradable answers; choose another pool in "
                              f"{setting} (or none) and launch a new run.")
    return PromptSet(pool_id, pool.task_type, tuple(row[0] for row in rows), tuple(row[1] for row in rows))


def correctness_reward_for(task_type: str, policy: str):
    """TRL reward function: 1.0 when the completion's answer matches the gold answer, graded as the probe
    graded (``policy``; a choice question's options read from the question)."""

    def correctness_reward(completions: list, answer: list[str], question: list[str], **_: Any) -> list[float]:
        rewards = []
        for completion, gold, text_of_question in zip(completions, answer, question, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            rewards.append(1.0 if grade(text, gold, task_type, policy, text_of_question) else 0.0)
        return rewards

    return correctness_reward


def build_dataset(rows: list[dict], tokenizer, prompt_format: PromptFormat):
    """Text prompts rendered as the probe rendered them. TRL tokenizes text prompts with the tokenizer's
    special tokens, so a BOS token the tokenizer adds itself is left out of the text."""
    from datasets import Dataset

    prompts = prompt_format.render(tokenizer, [row["prompt"] for row in rows])
    return Dataset.from_list([{"prompt": without_added_bos(tokenizer, prompt), "answer": row["answer"],
                               "question": row["prompt"]} for prompt, row in zip(prompts, rows, strict=True)])


def base_weights(load_in_4bit: bool) -> tuple[str, bool]:
    """How this worker holds the base model's weights for training, in words, and whether in 4 bits: float32 on
    the CPU, bfloat16 on a GPU that supports it, NF4 when asked for and bitsandbytes and a CUDA GPU are there."""
    import torch

    cuda = torch.cuda.is_available()
    plain = "bfloat16" if cuda and torch.cuda.is_bf16_supported() else "float32"
    if not load_in_4bit:
        return plain, False
    if not cuda:
        return f"{plain} (4-bit was asked for: it needs a CUDA GPU, and this worker has none)", False
    try:
        bitsandbytes = version("bitsandbytes")
    except PackageNotFoundError:
        return (f"{plain} (4-bit was asked for: bitsandbytes is not installed on this worker; pip install "
                "'budgetlab[gpu]')"), False
    return f"4-bit NF4 (bitsandbytes {bitsandbytes}), computing in {plain}", True


def load_policy(model_name: str, load_in_4bit: bool = False):
    """(model, tokenizer) for training: float32 on the CPU, bfloat16 on a GPU that supports it; with
    ``load_in_4bit`` and bitsandbytes on a CUDA GPU, NF4 weights for QLoRA (`base_weights`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from worker.model_store import SAFE_MODEL_LOAD, SAFE_TOKENIZER_LOAD, ModelLoadError, ensure_checkpoint

    checkpoint = ensure_checkpoint(model_name)
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    quantized = {}
    if base_weights(load_in_4bit)[1]:
        from transformers import BitsAndBytesConfig

        quantized = {"quantization_config": BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype,
            bnb_4bit_use_double_quant=True), "device_map": {"": torch.cuda.current_device()}}
    try:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint, **SAFE_TOKENIZER_LOAD)
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype, **SAFE_MODEL_LOAD, **quantized)
    except Exception as exc:
        raise ModelLoadError(f"Could not load model '{model_name}' from {checkpoint}: {describe(exc)}") from exc
    if quantized:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def grpo_config(settings: TrainingSettings, output_dir: Path):
    import torch
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    return GRPOConfig(**grpo_config_kwargs(settings, cuda=cuda, bf16=cuda and torch.cuda.is_bf16_supported(),
                                           output_dir=str(output_dir)))


def lora_config(settings: TrainingSettings):
    from peft import LoraConfig

    return LoraConfig(**lora_config_kwargs(settings))


def build_trainer(work: TrainingWork, callbacks: list | None = None):
    from trl import GRPOTrainer

    model, tokenizer = load_policy(work.settings.model, work.settings.load_in_4bit)
    dataset = build_dataset(work.rows, tokenizer, work.prompt_format)
    _record_prompt_example(work.run_id, dataset[0]["prompt"])
    return GRPOTrainer(model=model, reward_funcs=[correctness_reward_for(work.task_type, work.grading_policy)],
                       args=grpo_config(work.settings, run_dir(work.run_id) / "trainer"),
                       train_dataset=dataset, processing_class=tokenizer,
                       peft_config=lora_config(work.settings), callbacks=callbacks or [])


def _record_prompt_example(run_id: int, prompt: str) -> None:
    """What the policy is given, kept on the run, so its page shows the template it trained with."""
    with session_scope() as session:
        session.execute(update(Run).where(Run.id == run_id).values(prompt_example=prompt))


def _fit(ctx: TaskContext, work: TrainingWork) -> str:
    from worker.metrics_callback import MetricsCallback

    run_id = work.run_id
    callback = MetricsCallback(run_id, ctx, work.settings.max_steps)
    callbacks = [callback]
    if work.evaluation:
        from worker.evaluation import EvaluationCallback

        # First, so the step-0 evaluation is over before MetricsCallback starts timing steps for the ETA.
        callbacks.insert(0, EvaluationCallback(run_id, ctx, work.evaluation, every=work.settings.eval_every,
                                               max_new_tokens=work.settings.max_completion_length,
                                               prompt_format=work.prompt_format,
                                               grading_policy=work.grading_policy,
                                               temperature=work.settings.eval_temperature,
                                               seed=work.settings.seed))
    trainer = build_trainer(work, callbacks)
    trainer.train()
    if callback.stopped or not _going_on(ctx, work, callback.last_step):
        return "stopped"
    if work.ood:
        from worker.evaluation import evaluate_ood

        evaluate_ood(run_id, ctx, trainer.model, trainer.processing_class, work.ood, step=callback.last_step,
                     k=work.settings.ood_k,
                     max_new_tokens=work.settings.ood_max_new_tokens or work.settings.max_completion_length,
                     temperature=work.settings.temperature, seed=work.settings.seed,
                     prompt_format=work.prompt_format, grading_policy=work.grading_policy)
        if not _going_on(ctx, work, callback.last_step):
            return "stopped"
    adapter = run_dir(run_id) / "adapter"
    trainer.model.save_pretrained(str(adapter))
    with session_scope() as session:
        job = ctx.complete(session)
        if job is None:  # ended elsewhere meanwhile: no adapter is offered
            return "stopped"
        session.get(Run, run_id).adapter_path = str(adapter)
        ctx.succeed(session, job, f"trained {callback.last_step} steps; adapter saved")
    return SUCCEEDED


def _going_on(ctx: TaskContext, work: TrainingWork, last_step: int) -> bool:
    """False when a cancel was asked for (recorded here, metrics kept) or the job ended elsewhere."""
    return ctx.beat(stopped=f"after step {last_step} of {work.settings.max_steps} (metrics kept)")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m worker.training RUN_ID", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO)
    outcome = train_run(int(args[0]))
    print(outcome)
    return 0 if outcome == SUCCEEDED else 1


if __name__ == "__main__":
    raise SystemExit(main())
