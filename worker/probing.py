"""The probe job kind's work: run one shard (``run_shard``, what the engine calls with a TaskContext), or a
whole probe in this process (``run_probe``, the CLI's --local and the tests).

A shard is a slice of the pool by prompt position. Its samples and scores are written in one transaction
together with the shard's ``completed_at`` and its task's completion, so a shard that crashes leaves nothing
behind and a rerun never double counts; a rerun of a completed shard is skipped. After each batch the shard
beats (progress, its lease, a cancel check). The shard that completes the probe records the probe's
samples/s and the job succeeds. Failures and retries are the engine's (backend.jobs.engine).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import func, insert
from sqlmodel import Session, select

from backend.curation.grading import TASK_TYPES, extract_answer, grade_answers, question_options
from backend.curation.scores import score_prompt
from backend.database import session_scope
from backend.jobs.engine import JobFailure, TaskContext, execute, owner_name, run_here
from backend.jobs.tables import JobTask
from backend.pools.tables import Pool, Prompt
from backend.probes.kind import PROBE
from backend.probes.tables import Probe, ProbeShard, PromptScore, Sample
from backend.timeutil import format_duration, utcnow
from worker.engines.base import GenerationEngine, derive_seed

log = logging.getLogger(__name__)

SKIPPED = "skipped"
COMPLETED = "completed"
CANCELLED = "cancelled"

_override = threading.local()


@dataclass(frozen=True)
class ShardWork:
    """What a shard needs, read once so that generation runs outside any transaction."""

    probe_id: int
    shard_index: int
    shard_count: int
    first_position: int
    model: str
    k: int
    temperature: float
    max_new_tokens: int
    template: str | None
    chat_template_options: dict | None
    grading_policy: str
    seed: int
    label_free: bool
    task_type: str
    prompt_ids: list[int]
    texts: list[str]
    golds: list[str | None]
    prompt_count: int  # of the whole probe


# --- entry points ----------------------------------------------------------------------------------


def run_shard(ctx: TaskContext) -> str:
    """The kind's run function: probe the shard named by ctx.args."""
    work = _read_work(ctx.args["probe_id"], ctx.args["shard_index"])
    if isinstance(work, str):
        return work
    return _probe(ctx, work, _engine(work.model))


def load_engine(args: dict) -> None:
    """The kind's prepare function: load the probe's model (cached per process) before the claim."""
    with session_scope() as session:
        probe = session.get(Probe, args["probe_id"])
        model = probe.model if probe else None
    if model is not None:
        _engine(model)


def _engine(model: str) -> GenerationEngine:
    engine = getattr(_override, "engine", None)
    if engine is None:
        from worker.engines import get_engine

        engine = get_engine(model)
    return engine


@contextmanager
def using_engine(engine: GenerationEngine | None) -> Iterator[None]:
    """Run shards in this thread with an engine already loaded (tests, benchmarks)."""
    previous = getattr(_override, "engine", None)
    _override.engine = engine
    try:
        yield
    finally:
        _override.engine = previous


def run_probe(probe_id: int, *, engine: GenerationEngine | None = None, backoff_seconds: float = 2.0) -> str:
    """Run every shard of a probe in this process, in order, with the engine's retry policy. Returns the
    job's final status ("succeeded", "failed" or "cancelled")."""
    with session_scope() as session:
        probe = session.get(Probe, probe_id)
        if probe is None:
            raise JobFailure(f"Probe {probe_id} does not exist.")
        job_id = probe.job_id
    with using_engine(engine):
        return run_here(job_id, backoff_seconds=backoff_seconds)


def run_probe_shard(probe_id: int, shard_index: int, *, engine: GenerationEngine | None = None,
                    delivery: str = "local", retries_so_far: int = 0) -> str:
    """Claim and run one shard's task in this process, as a worker would (tests)."""
    with session_scope() as session:
        probe = session.get(Probe, probe_id)
        task_id = session.exec(select(JobTask.id).where(
            JobTask.job_id == probe.job_id, JobTask.label == shard_label(shard_index))).first()
    with using_engine(engine):
        return execute(PROBE, task_id, owner_name(f"{delivery}-{task_id}"), retries_so_far=retries_so_far)


def shard_label(shard_index: int) -> str:
    return f"shard {shard_index}"


def _completed_prompts(session: Session, probe_id: int) -> int:
    done = session.exec(select(func.coalesce(func.sum(ProbeShard.end_position - ProbeShard.first_position), 0))
                        .where(ProbeShard.probe_id == probe_id, ProbeShard.completed_at.is_not(None))).one()
    return int(done)


def _read_work(probe_id: int, shard_index: int) -> ShardWork | str:
    with session_scope() as session:
        probe = session.get(Probe, probe_id)
        shard = session.get(ProbeShard, (probe_id, shard_index)) if probe else None
        if shard is None:
            raise JobFailure(f"Probe {probe_id} or its shard {shard_index} no longer exists (deleted?); "
                             "nothing to run.")
        if shard.completed_at is not None:
            return SKIPPED
        pool = session.get(Pool, probe.pool_id)
        if pool.task_type not in TASK_TYPES:
            raise JobFailure(f"Pool {pool.id} has task type '{pool.task_type}', which cannot be graded; "
                             f"use one of {', '.join(TASK_TYPES)}.")
        shard_count = session.exec(select(func.count()).select_from(ProbeShard)
                                   .where(ProbeShard.probe_id == probe_id)).one()
        rows = session.exec(select(Prompt.id, Prompt.text, Prompt.gold)
                            .where(Prompt.pool_id == probe.pool_id, Prompt.position >= shard.first_position,
                                   Prompt.position < shard.end_position)
                            .order_by(Prompt.position)).all()
        return ShardWork(
            probe_id=probe_id, shard_index=shard_index, shard_count=shard_count,
            first_position=shard.first_position, model=probe.model, k=probe.k, temperature=probe.temperature,
            max_new_tokens=probe.max_new_tokens, template=probe.template,
            chat_template_options=probe.chat_template_options, grading_policy=probe.grading_policy, seed=probe.seed,
            label_free=probe.label_free, task_type=pool.task_type, prompt_ids=[r[0] for r in rows],
            texts=[r[1] for r in rows], golds=[r[2] for r in rows], prompt_count=probe.prompt_count)


def _completed_elsewhere(probe_id: int) -> int:
    with session_scope() as session:
        return _completed_prompts(session, probe_id)


def _beat(ctx: TaskContext, work: ShardWork, done: int, before: int, generation_seconds: float,
          wall_seconds: float) -> bool:
    """Progress after a batch: prompts of completed shards (`before`) plus this shard's; False: stop."""
    samples_per_second = done * work.k / generation_seconds if generation_seconds > 0 else 0.0
    prompts_per_second = done / wall_seconds if wall_seconds > 0 else 0.0
    remaining = work.prompt_count - before - done
    eta = f", ETA {format_duration(remaining / prompts_per_second)}" if prompts_per_second > 0 else ""
    return ctx.beat(done=before + done, message=(
        f"shard {work.shard_index + 1}/{work.shard_count}: {done}/{len(work.prompt_ids)} prompts, "
        f"{samples_per_second:.1f} samples/s{eta}"),
        stopped=f"in shard {work.shard_index} after {done} of {len(work.prompt_ids)} prompts (its results were "
                "discarded)")


def storable_text(text: str) -> str:
    """Models can emit a NUL byte (a byte-fallback token); Postgres text cannot hold one."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def grade_shard(work: ShardWork, completions: list[list[str]]) -> tuple[list[dict], list[dict]]:
    """Sample rows and prompt-score rows (as dicts for a bulk insert) for the shard's completions."""
    samples: list[dict] = []
    scores: list[dict] = []
    for prompt_id, question, gold, outs in zip(work.prompt_ids, work.texts, work.golds, completions, strict=True):
        outs = [storable_text(text) for text in outs]
        options = question_options(work.task_type, question)
        extracted = [extract_answer(text, work.task_type, policy=work.grading_policy, options=options)
                     for text in outs]
        # Prompts with gold answers get pass rates; in a label-free probe (some prompts have none)
        # difficulty stays on the one scale every prompt has, agreement.
        correct = grade_answers(extracted, gold, work.task_type, work.grading_policy, options)
        score = score_prompt(extracted, correct, by_agreement=work.label_free)
        for index, (text, answer) in enumerate(zip(outs, extracted, strict=False)):
            samples.append({"probe_id": work.probe_id, "prompt_id": prompt_id, "sample_index": index,
                            "completion": text, "extracted_answer": answer,
                            "correct": None if correct is None else correct[index]})
        scores.append({"probe_id": work.probe_id, "prompt_id": prompt_id, "k": score.k,
                       "correct_count": score.correct_count, "pass_rate": score.pass_rate,
                       "wilson_low": score.wilson_low, "wilson_high": score.wilson_high,
                       "agreement": score.agreement, "majority_answer": score.majority_answer,
                       "base_wrong": score.base_wrong, "difficulty": score.difficulty})
    return samples, scores


def _commit(ctx: TaskContext, work: ShardWork, samples: list[dict], scores: list[dict], seconds: float) -> str:
    """Write the shard's results, mark it and its task completed, all or nothing; finish the job if it was the
    last shard."""
    with session_scope() as session:
        shard = session.exec(select(ProbeShard).where(ProbeShard.probe_id == work.probe_id,
                                                      ProbeShard.shard_index == work.shard_index)
                             .with_for_update().execution_options(populate_existing=True)).one()
        if shard.completed_at is not None:  # another worker finished it meanwhile
            return SKIPPED
        connection = session.connection()
        if samples:
            connection.execute(insert(Sample.__table__), samples)
        if scores:
            connection.execute(insert(PromptScore.__table__), scores)
        shard.completed_at = utcnow()
        shard.seconds = seconds
        session.add(shard)
        session.flush()
        job = ctx.complete(session)  # locks the job: two finishing shards serialise, one of them is last
        shards = list(session.exec(select(ProbeShard).where(ProbeShard.probe_id == work.probe_id)
                                   .execution_options(populate_existing=True)))
        done = sum(s.end_position - s.first_position for s in shards if s.completed_at is not None)
        if job is None:
            ctx.note_progress(session, done=done, message=f"shard {work.shard_index + 1}/{len(shards)} done; {done}/"
                                                    f"{work.prompt_count} prompts probed")
            return COMPLETED
        probe = session.get(Probe, work.probe_id)
        total_samples = sum((s.end_position - s.first_position) * probe.k for s in shards)
        total_seconds = sum(s.seconds or 0.0 for s in shards)
        probe.samples_per_second = total_samples / total_seconds if total_seconds > 0 else None
        session.add(probe)
        rate = f", {probe.samples_per_second:.1f} samples/s" if probe.samples_per_second else ""
        ctx.succeed(session, job, f"done: {probe.prompt_count} prompts x {probe.k} samples{rate}")
    return COMPLETED


def _probe(ctx: TaskContext, work: ShardWork, engine: GenerationEngine) -> str:
    rendered = engine.render(work.texts, work.template, work.chat_template_options)
    chunk = max(1, engine.prompts_per_batch(work.k))
    before = _completed_elsewhere(work.probe_id)
    if not ctx.beat(done=before, message=f"shard {work.shard_index + 1}/{work.shard_count}: {work.model} loaded",
                    stopped=f"in shard {work.shard_index} before its first batch"):
        return CANCELLED
    completions: list[list[str]] = []
    generation_seconds = 0.0
    started = time.perf_counter()
    for start in range(0, len(rendered), chunk):
        batch = rendered[start:start + chunk]
        t0 = time.perf_counter()
        outputs = engine.generate(batch, k=work.k, temperature=work.temperature,
                                  max_new_tokens=work.max_new_tokens,
                                  seed=derive_seed(work.seed, work.first_position + start))
        generation_seconds += time.perf_counter() - t0
        if len(outputs) != len(batch) or any(len(outs) != work.k for outs in outputs):
            raise RuntimeError(f"the {type(engine).__name__} returned {len(outputs)} prompts' completions for "
                               f"{len(batch)} prompts (k={work.k})")
        completions.extend(outputs)
        if not _beat(ctx, work, len(completions), before, generation_seconds, time.perf_counter() - started):
            return CANCELLED
    samples, scores = grade_shard(work, completions)
    return _commit(ctx, work, samples, scores, generation_seconds)
