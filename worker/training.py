"""The GRPO training job as a plain function: ``train_run(run_id)``, or ``python -m worker.training RUN_ID``.

TRL's ``GRPOTrainer`` with a PEFT LoRA config and the binary correctness reward (the pool's grader:
``extract_answer`` + ``is_correct`` against ``parse_gold``, under the run's grading policy, by default the
probe's). Prompts are rendered exactly as the subset's probe rendered them (its template and chat-template
options), for training and for every evaluation, so the policy learns on the input it was probed with.
``MetricsCallback`` writes every logged value to ``run_metric`` as it arrives and stops cleanly on a cancel
request. On success the LoRA adapter is saved under ``<artifacts>/runs/<id>/adapter``.

Errors: a lost database connection raises ``TransientTrainingError`` when asked (the Celery task
retries it); an out-of-memory fails the run with advice on which settings to lower (the same
settings would run out again), and anything else fails it with a one-line message (traceback in
the log). A task delivered again for a run whose worker died fails it as lost, keeping its metrics.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sqlalchemy import delete, update
from sqlmodel import select

from backend.curation.grading import TASK_TYPES, grade, parse_gold
from backend.database import session_scope
from backend.jobs.service import fail_unless_finished, lock_job, transition
from backend.jobs.tables import FINISHED, Job, JobStatus
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe
from backend.runs.downloads import run_dir
from backend.runs.service import describe_lost_run
from backend.runs.settings import TrainingSettings, check_training_settings, grpo_config_kwargs, lora_config_kwargs
from backend.runs.tables import Run, RunMetric
from backend.settings import get_settings
from backend.subsets.export import export_rows
from backend.subsets.service import unlabeled_members
from backend.subsets.tables import Subset
from backend.timeutil import utcnow
from worker.probing import describe, is_transient
from worker.prompting import PromptFormat, without_added_bos

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
LIBRARIES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets")


class TrainingFailure(RuntimeError):
    """A final failure whose message is shown to the user as is."""


class TransientTrainingError(RuntimeError):
    """Worth retrying: the database went away."""


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
    job_id: int
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
    for name in LIBRARIES:
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    if torch.cuda.is_available():
        bf16 = " bf16" if torch.cuda.is_bf16_supported() else ""
        found["device"] = f"cuda: {torch.cuda.get_device_name(0)}{bf16}"
    else:
        found["device"] = "cpu"
    return found


# --- entry point -----------------------------------------------------------------------------------


def train_run(run_id: int, *, raise_transient: bool = False, retrying: bool = False) -> str:
    """Train one run; returns the job's final status ("succeeded", "failed" or "cancelled"), or "running"
    when another worker is training it. ``retrying``: this is a retry after a transient error."""
    try:
        return _train(run_id, retrying)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        if raise_transient and is_transient(exc) and not is_out_of_memory(exc):  # same settings, same OOM
            requeue_run_job(run_id, f"transient error, retrying: {describe(exc)}")
            raise TransientTrainingError(f"run {run_id}: {describe(exc)}") from exc
        if isinstance(exc, TrainingFailure):
            message = str(exc)
        elif is_out_of_memory(exc):
            message = ("Training ran out of memory. Lower batch_size or max_completion_length (or "
                       f"num_generations), or use a smaller model. ({describe(exc)})")
        else:
            from worker.model_store import ModelLoadError

            message = str(exc) if isinstance(exc, ModelLoadError) else (
                f"Training failed: {describe(exc).rstrip('.')}. See the worker log for the traceback.")
            log.exception("run %s failed", run_id)
        fail_run_job(run_id, message)
        return FAILED


def is_out_of_memory(exc: BaseException) -> bool:
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch else None
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if oom_type is not None and isinstance(exc, oom_type):
            return True
        if isinstance(exc, (MemoryError,)) or (isinstance(exc, RuntimeError) and (
                "out of memory" in str(exc).lower() or "can't allocate memory" in str(exc).lower())):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def fail_run_job(run_id: int, message: str) -> None:
    try:
        with session_scope() as session:
            run = session.get(Run, run_id)
            if run is None:
                log.error("run %s does not exist: %s", run_id, message)
                return
            fail_unless_finished(session, run.job_id, message)
    except Exception:
        log.exception("could not mark run %s failed: %s", run_id, message)


def requeue_run_job(run_id: int, reason: str) -> None:
    """Back to queued, so the retried task can tell a retry from a worker lost mid-run."""
    try:
        with session_scope() as session:
            run = session.get(Run, run_id)
            job = lock_job(session, run.job_id) if run else None
            if job is not None and job.status == JobStatus.running.value:
                transition(session, job, JobStatus.queued, reason[:1000])
    except Exception:
        log.exception("could not requeue run %s", run_id)


# --- steps -----------------------------------------------------------------------------------------


def _start(run_id: int, retrying: bool) -> TrainingWork | str:
    """Claim the run's job (short transaction), then read what training needs."""
    versions = library_versions()  # imports torch: done before any row is locked
    with session_scope() as session:
        outcome = _claim(session, run_id, retrying)
        if outcome is not None:
            return outcome
        session.get(Run, run_id).library_versions = versions
    with session_scope() as session:
        return _read_work(session, run_id)


def _claim(session, run_id: int, retrying: bool) -> str | None:
    """Move the job to running; a status to return instead when there is nothing to train."""
    run = session.get(Run, run_id)
    if run is None:
        raise TrainingFailure(f"Run {run_id} does not exist (deleted?); nothing to train.")
    job = lock_job(session, run.job_id)
    status = JobStatus(job.status)
    if status in FINISHED:
        return job.status
    if status == JobStatus.cancelling:
        transition(session, job, JobStatus.cancelled, "cancel requested; the previous attempt never finished")
        return CANCELLED
    if status == JobStatus.running and not retrying:  # delivered again
        silent_since = utcnow() - timedelta(seconds=get_settings().worker_lost_seconds)
        if job.heartbeat_at is not None and job.heartbeat_at > silent_since:
            log.warning("run %s is being trained by another worker (fresh heartbeat); not starting it", run_id)
            return JobStatus.running.value
        raise TrainingFailure(describe_lost_run(session, job))  # its worker died without finishing
    if status == JobStatus.queued:
        transition(session, job, JobStatus.running, "training started")
    else:  # a retry whose requeue did not get through: restarted in place
        job.heartbeat_at = utcnow()
    session.execute(delete(RunMetric).where(RunMetric.run_id == run_id))  # a retry starts from step 0 again
    settings = TrainingSettings(**run.settings)
    job.progress_total = settings.max_steps
    job.progress_done = 0
    job.message = f"loading {settings.model}"
    session.add(job)
    return None


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
    return TrainingWork(run_id=run_id, job_id=run.job_id, settings=settings, task_type=pool.task_type, rows=rows,
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


def load_policy(model_name: str):
    """(model, tokenizer) for training: float32 on the CPU, bfloat16 on a GPU that supports it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from worker.model_store import ModelLoadError, ensure_checkpoint

    checkpoint = ensure_checkpoint(model_name)
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    try:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype)
    except Exception as exc:
        raise ModelLoadError(f"Could not load model '{model_name}' from {checkpoint}: {describe(exc)}") from exc
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

    model, tokenizer = load_policy(work.settings.model)
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


def _train(run_id: int, retrying: bool) -> str:
    work = _start(run_id, retrying)
    if isinstance(work, str):
        return work
    with Heartbeat(work.job_id, get_settings().heartbeat_seconds):
        return _fit(work)


def _fit(work: TrainingWork) -> str:
    from worker.metrics_callback import MetricsCallback

    run_id = work.run_id
    callback = MetricsCallback(run_id, work.job_id, work.settings.max_steps)
    callbacks = [callback]
    if work.evaluation:
        from worker.evaluation import EvaluationCallback

        # First, so the step-0 evaluation is over before MetricsCallback starts timing steps for the ETA.
        callbacks.insert(0, EvaluationCallback(run_id, work.job_id, work.evaluation, every=work.settings.eval_every,
                                               max_new_tokens=work.settings.max_completion_length,
                                               prompt_format=work.prompt_format,
                                               grading_policy=work.grading_policy))
    trainer = build_trainer(work, callbacks)
    trainer.train()
    ended = _ended_early(work, callback.last_step)
    if ended:
        return ended
    if work.ood:
        from worker.evaluation import evaluate_ood

        evaluate_ood(run_id, work.job_id, trainer.model, trainer.processing_class, work.ood, step=callback.last_step,
                     k=work.settings.ood_k, max_new_tokens=work.settings.max_completion_length,
                     temperature=work.settings.temperature, seed=work.settings.seed,
                     prompt_format=work.prompt_format, grading_policy=work.grading_policy)
        ended = _ended_early(work, callback.last_step)
        if ended:
            return ended
    adapter = run_dir(run_id) / "adapter"
    trainer.model.save_pretrained(str(adapter))
    with session_scope() as session:
        job = lock_job(session, work.job_id)
        if JobStatus(job.status) in FINISHED:  # failed elsewhere meanwhile: no adapter is offered
            return job.status
        session.get(Run, run_id).adapter_path = str(adapter)
        job.progress_done = job.progress_total
        job.message = f"trained {callback.last_step} steps; adapter saved"
        transition(session, job, JobStatus.succeeded, f"trained {callback.last_step} steps")
    return SUCCEEDED


def _ended_early(work: TrainingWork, last_step: int) -> str | None:
    """The final status when a cancel was asked for, or the job was ended elsewhere; else None."""
    with session_scope() as session:
        job = lock_job(session, work.job_id)
        if JobStatus(job.status) in FINISHED:
            return job.status
        if job.status == JobStatus.cancelling.value:
            transition(session, job, JobStatus.cancelled,
                       f"cancel requested; stopped after step {last_step} of {work.settings.max_steps} (metrics kept)")
            job.message = f"cancelled after step {last_step}/{work.settings.max_steps}"
            return CANCELLED
    return None


class Heartbeat:
    """Writes the job's heartbeat every few seconds from a thread, so a long step or evaluation never
    looks like a lost worker, and a killed worker stops beating (the API then fails the run)."""

    def __init__(self, job_id: int, every: float):
        self.job_id = job_id
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-job-{job_id}", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                with session_scope() as session:
                    session.execute(update(Job).where(Job.id == self.job_id).values(heartbeat_at=utcnow()))
            except Exception:  # the database may be briefly away; the next beat tries again
                log.warning("heartbeat of job %s failed", self.job_id, exc_info=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every + 5)


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
