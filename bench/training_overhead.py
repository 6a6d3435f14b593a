"""Training overhead of our bookkeeping: plain GRPOTrainer vs GRPOTrainer with everything a run adds.

What it does:
1. points the settings at a fresh SQLite database in a temp dir (or DATABASE_URL if set, e.g. Postgres),
   migrates it (alembic upgrade head) and writes the rows a run needs (pool, probe, subset, job, run);
2. builds the same GRPO trainer (TRL + PEFT LoRA, CPU, the correctness reward on a numeric pool,
   the same seed, so both variants do the same work) twice per round:
   - plain: no callback of ours; the same greedy evaluation generation (every --eval-every steps on
     --eval-samples prompts) runs in a bare callback, so both variants generate the same tokens;
   - ours: ``MetricsCallback`` (every logged value to ``run_metric``, and after each step the job engine's
     beat: progress, lease renewal and cancel check in one transaction) and ``EvaluationCallback`` (a beat
     with the job message and metric rows around the same generation), both holding the run's task,
     claimed once through ``backend.jobs.engine.claim`` as a worker would;
3. alternates the variants for --rounds rounds and reports the median wall time per step
   (trainer.train() time / steps) of each, and the time spent in our bookkeeping itself (``on_log``, the
   per-step beat in ``on_step_end``, plus evaluation minus its generation), which is the overhead without
   the machine's noise.

Usage:  .venv/bin/python bench/training_overhead.py [--model tiny-random-SmolLM2] [--steps 10] [--rounds 2]
Target (issue): callback, metric writes and evaluation bookkeeping add ≤ 5 % to a training step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_database(tmp: Path) -> None:
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp / 'bench.db'}")
    os.environ["BUDGETLAB_DATA_DIR"] = str(tmp)
    os.environ.setdefault("BUDGETLAB_ARTIFACT_DIR", str(ROOT / "data" / "artifacts"))
    import backend.job_kinds  # noqa: F401  (registers every job kind, as a worker does)
    from backend.migrate import upgrade_head
    from backend.settings import get_settings

    get_settings.cache_clear()
    upgrade_head(get_settings().sqlalchemy_url)


def make_run(settings: dict, prompts: int) -> int:
    from sqlalchemy import insert
    from sqlmodel import select

    from backend.database import session_scope
    from backend.jobs.service import transition
    from backend.jobs.tables import JobStatus
    from backend.pools.tables import Pool, Prompt
    from backend.probes.tables import Probe, PromptScore
    from backend.runs.service import create_run
    from backend.subsets.tables import Subset, SubsetMember

    with session_scope() as session:
        pool = Pool(name="bench", task_type="numeric", has_answers=True, prompt_count=prompts)
        session.add(pool)
        session.flush()
        session.execute(insert(Prompt), [{"pool_id": pool.id, "position": i, "external_id": f"q{i}",
                                          "text": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1),
                                          "gold": str(2 * i + 1)} for i in range(prompts)])
        ids = list(session.exec(select(Prompt.id).where(Prompt.pool_id == pool.id).order_by(Prompt.position)))
        from backend.jobs.service import create_job

        probe_job = create_job(session, "probe", total=prompts)
        probe = Probe(pool_id=pool.id, job_id=probe_job.id, model=settings["model"], k=2, temperature=1.0,
                      max_new_tokens=8, seed=0, label_free=False, shard_size=256, prompt_count=prompts)
        session.add(probe)
        session.flush()
        session.execute(insert(PromptScore), [
            {"probe_id": probe.id, "prompt_id": pid, "k": 2, "correct_count": 1, "pass_rate": 0.5,
             "wilson_low": None, "wilson_high": None, "agreement": 0.5, "majority_answer": None,
             "base_wrong": True, "difficulty": 0.5} for pid in ids])
        transition(session, probe_job, JobStatus.running, "bench")
        transition(session, probe_job, JobStatus.succeeded, "bench")
        subset = Subset(name="bench", probe_id=probe.id, pool_id=pool.id, strategy="random", budget_kind="count",
                        budget_value=prompts, n_requested=prompts, n=prompts, seed=0, group_size=2,
                        predicted_learnable_share=0.5)
        session.add(subset)
        session.flush()
        session.execute(insert(SubsetMember), [{"subset_id": subset.id, "rank": r, "prompt_id": pid}
                                               for r, pid in enumerate(ids)])
        run = create_run(session, subset.id, {**settings, "eval_pool_id": pool.id})
        return run.id


def start_training(run_id: int):
    """Claim the run's task as a worker would (the job becomes running) and read what training needs:
    (TrainingWork, TaskContext). The callbacks of the "ours" variant beat through this context."""
    from sqlmodel import select

    from backend.database import session_scope
    from backend.jobs.engine import claim, owner_name
    from backend.jobs.tables import JobTask
    from backend.runs.kind import TRAIN
    from backend.runs.tables import Run
    from worker.training import _start

    with session_scope() as session:
        job_id = session.get(Run, run_id).job_id
        task_id = session.exec(select(JobTask.id).where(JobTask.job_id == job_id)).one()
    ctx = claim(TRAIN, task_id, owner_name("bench"))
    if isinstance(ctx, str):
        raise SystemExit(f"could not claim the run's task: {ctx}")
    return _start(ctx), ctx


class Stopwatch:
    """Adds up the time spent in wrapped methods."""

    def __init__(self):
        self.seconds = 0.0

    def wrap(self, owner, name: str, sign: int = 1) -> None:
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += sign * (time.perf_counter() - started)

        setattr(owner, name, timed)


def plain_evaluation(work):
    """The evaluation generation alone, with no database: what the plain variant also spends."""
    from transformers import TrainerCallback

    from worker.evaluation import accuracy, greedy_completions

    every = work.settings.eval_every

    class PlainEvaluation(TrainerCallback):
        def run(self, model, tokenizer):
            prompts = work.evaluation
            texts = greedy_completions(model, tokenizer, list(prompts.questions), work.settings.max_completion_length,
                                       work.prompt_format)
            accuracy(texts, prompts, work.grading_policy)

        def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
            self.run(model, processing_class)

        def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
            if state.global_step % every == 0:
                self.run(model, processing_class)

    return PlainEvaluation()


def train_once(work, ctx, ours: bool) -> tuple[float, float, int]:
    """(seconds per step, bookkeeping seconds per step, metric rows written)."""
    from sqlalchemy import func
    from sqlmodel import select

    import worker.evaluation as evaluation
    from backend.database import session_scope
    from backend.runs.tables import RunMetric
    from worker.metrics_callback import MetricsCallback
    from worker.training import build_trainer

    watch = Stopwatch()
    if ours:
        metrics = MetricsCallback(work.run_id, ctx, work.settings.max_steps)
        evaluator = evaluation.EvaluationCallback(work.run_id, ctx, work.evaluation,
                                                  every=work.settings.eval_every,
                                                  max_new_tokens=work.settings.max_completion_length,
                                                  prompt_format=work.prompt_format,
                                                  grading_policy=work.grading_policy)
        watch.wrap(metrics, "on_log")
        watch.wrap(metrics, "on_step_end")  # the beat: progress, lease and cancel check after each step
        watch.wrap(evaluator, "evaluate")
        callbacks = [metrics, evaluator]
    else:
        callbacks = [plain_evaluation(work)]
    generation = evaluation.greedy_completions
    if ours:  # evaluation's generation is the same work in both variants: not bookkeeping
        watch.wrap(evaluation, "greedy_completions", sign=-1)
    trainer = build_trainer(work, callbacks)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # keep the console quiet in both variants
    started = time.perf_counter()
    try:
        trainer.train()
    finally:
        evaluation.greedy_completions = generation
    seconds = time.perf_counter() - started
    steps = trainer.state.global_step
    with session_scope() as session:
        rows = session.exec(select(func.count()).select_from(RunMetric).where(RunMetric.run_id == work.run_id)).one()
    return seconds / steps, (watch.seconds / steps if ours else 0.0), int(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tiny-random-SmolLM2")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-samples", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=16)
    args = parser.parse_args()

    import logging

    logging.disable(logging.WARNING)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    tmp = Path(tempfile.mkdtemp(prefix="budgetlab-train-bench-"))
    setup_database(tmp)
    settings = {"model": args.model, "lora_rank": 8, "lora_alpha": 16, "num_generations": args.generations,
                "batch_size": args.prompts_per_step * args.generations,
                "max_completion_length": args.max_completion_length, "max_steps": args.steps, "learning_rate": 1e-4,
                "seed": 0, "eval_every": args.eval_every, "eval_samples": args.eval_samples}
    run_id = make_run(settings, prompts=32)

    work, ctx = start_training(run_id)
    from backend.settings import get_settings

    print(f"model {args.model}, {args.steps} steps × {args.prompts_per_step} prompts × G={args.generations}, "
          f"{args.max_completion_length} new tokens, evaluation every {args.eval_every} steps on "
          f"{args.eval_samples} prompts, torch threads {torch.get_num_threads()}, "
          f"database {get_settings().sqlalchemy_url.split(':')[0]}")
    plain, with_cb, cb_time = [], [], []
    for round_index in range(args.rounds):
        for variant in (False, True):
            per_step, callback_per_step, rows = train_once(work, ctx, variant)
            (with_cb if variant else plain).append(per_step)
            if variant:
                cb_time.append(callback_per_step)
            print(f"round {round_index + 1} {'ours ' if variant else 'plain'}: {per_step * 1000:8.1f} ms/step"
                  + (f", bookkeeping {callback_per_step * 1000:.2f} ms/step, {rows} metric rows" if variant else ""))
    plain_median = statistics.median(plain)
    cb_median = statistics.median(with_cb)
    callback_median = statistics.median(cb_time)
    print(f"median plain:    {plain_median * 1000:.1f} ms/step")
    print(f"median ours:     {cb_median * 1000:.1f} ms/step  (wall-clock ratio {cb_median / plain_median:.3f})")
    print(f"time in our bookkeeping: {callback_median * 1000:.2f} ms/step = "
          f"{100 * callback_median / plain_median:.2f} % of a plain step (target ≤ 5 %)")


if __name__ == "__main__":
    main()
