"""The probe job as plain functions: run one shard (what a Celery task does) or a whole probe (CLI).

A shard is a slice of the pool by prompt position. Its samples and scores are written in one
transaction together with the shard's ``completed_at``, so a shard that crashes leaves nothing
behind and a rerun never double counts; a rerun of a completed shard is skipped. Between batches
the job row is checked for a cancel request and its (advisory) progress is updated. The shard that
completes the probe records the probe's samples/s and moves the job to ``succeeded``.

Errors: a lost database connection or a GPU out-of-memory raises ``TransientProbeError`` (the
task retries it); anything else fails the job with a message a person can act on.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import exc as sa_exc
from sqlalchemy import func, insert
from sqlmodel import Session, select

from backend.curation.grading import TASK_TYPES, extract_answer, grade_answers, question_options
from backend.curation.scores import score_prompt
from backend.database import session_scope
from backend.jobs.service import fail_unless_finished, lock_job, transition
from backend.jobs.tables import FINISHED, Job, JobStatus
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe, ProbeShard, PromptScore, Sample
from backend.timeutil import format_duration, utcnow
from worker.engines.base import GenerationEngine, derive_seed

log = logging.getLogger(__name__)

SKIPPED = "skipped"
COMPLETED = "completed"
CANCELLED = "cancelled"
FAILED = "failed"


class TransientProbeError(RuntimeError):
    """A failure worth retrying: the database went away, or the GPU ran out of memory."""


class ProbeFailure(RuntimeError):
    """A final failure whose message is shown to the user as is."""


@dataclass(frozen=True)
class ShardWork:
    """What a shard needs, read once so that generation runs outside any transaction."""

    probe_id: int
    job_id: int
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
    progress_total: int


# --- entry points ----------------------------------------------------------------------------------


def run_probe_shard(probe_id: int, shard_index: int, *, engine: GenerationEngine | None = None,
                    engine_factory: Callable[[str], GenerationEngine] | None = None) -> str:
    """Probe one shard. Returns "completed", "skipped" (already done), "cancelled" or "failed".

    Raises ``TransientProbeError`` for failures worth retrying; any other failure moves the job to
    ``failed`` with an explanation and returns "failed".
    """
    try:
        return _run_shard(probe_id, shard_index, engine, engine_factory)
    except TransientProbeError:
        raise
    except (KeyboardInterrupt, SystemExit):  # the worker is stopping: the task is redelivered
        raise
    except Exception as exc:
        if is_transient(exc):
            _note_transient(probe_id, shard_index, exc)
            raise TransientProbeError(f"shard {shard_index} of probe {probe_id}: {describe(exc)}") from exc
        message = exc.args[0] if isinstance(exc, ProbeFailure) else failure_message(exc, shard_index)
        log.exception("probe %s shard %s failed", probe_id, shard_index)
        fail_probe_job(probe_id, message)
        return FAILED


def run_probe(probe_id: int, *, engine: GenerationEngine | None = None, retries: int = 3,
              backoff_seconds: float = 2.0) -> str:
    """Run every shard of a probe in this process, in order (the CLI's way, without a worker).

    Transient errors are retried with exponential backoff, like the Celery task does. Returns the
    job's final status ("succeeded", "failed" or "cancelled").
    """
    with session_scope() as session:
        probe = session.get(Probe, probe_id)
        if probe is None:
            raise ProbeFailure(f"Probe {probe_id} does not exist.")
        job_id = probe.job_id
        indexes = list(session.exec(select(ProbeShard.shard_index).where(ProbeShard.probe_id == probe_id)
                                    .order_by(ProbeShard.shard_index)))
    for shard_index in indexes:
        for attempt in range(retries + 1):
            try:
                outcome = run_probe_shard(probe_id, shard_index, engine=engine)
                break
            except TransientProbeError as exc:
                if attempt == retries:
                    fail_probe_job(probe_id, f"Shard {shard_index} failed {retries + 1} times with a transient "
                                             f"error; giving up. Last error: {exc}")
                    return FAILED
                log.warning("retrying after a transient error: %s", exc)
                time.sleep(backoff_seconds * 2 ** attempt)
        if outcome in (CANCELLED, FAILED):
            break
    with session_scope() as session:
        return session.get(Job, job_id).status


# --- errors ----------------------------------------------------------------------------------------


def _causes(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def is_transient(exc: BaseException) -> bool:
    """Lost or busy database connections and CUDA out-of-memory (anywhere in the cause chain)."""
    torch = sys.modules.get("torch")
    cuda_oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch else None
    for cause in _causes(exc):
        if isinstance(cause, (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.DisconnectionError,
                              sa_exc.TimeoutError)):
            return True
        if isinstance(cause, sa_exc.DBAPIError) and cause.connection_invalidated:
            return True
        if cuda_oom is not None and isinstance(cause, cuda_oom):
            return True
        module = type(cause).__module__ or ""
        if module.startswith("psycopg") and type(cause).__name__ in {"OperationalError", "InterfaceError"}:
            return True
    return False


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


def failure_message(exc: BaseException, shard_index: int) -> str:
    from worker.model_store import ModelLoadError

    if isinstance(exc, ModelLoadError):
        return str(exc)
    return f"Probing failed in shard {shard_index}: {describe(exc)}. See the worker log for the traceback."


def _note_transient(probe_id: int, shard_index: int, exc: BaseException) -> None:
    """Best effort: tell the user a retry is coming (the database may be the thing that is down)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()  # what the failed batch held, before the retry
    try:
        with session_scope() as session:
            probe = session.get(Probe, probe_id)
            job = session.get(Job, probe.job_id) if probe else None
            if job is not None and JobStatus(job.status) not in FINISHED:
                job.message = f"shard {shard_index}: transient error, retrying ({describe(exc)})"[:1000]
                session.add(job)
    except Exception:
        log.warning("could not record the transient error of probe %s", probe_id)


def fail_probe_job(probe_id: int, message: str) -> None:
    """Move the probe's job to failed with ``message`` (unless it already finished)."""
    try:
        with session_scope() as session:
            probe = session.get(Probe, probe_id)
            if probe is None:
                log.error("probe %s does not exist: %s", probe_id, message)
                return
            fail_unless_finished(session, probe.job_id, message)
    except Exception:
        log.exception("could not mark the job of probe %s failed: %s", probe_id, message)


# --- the shard -------------------------------------------------------------------------------------


def _completed_prompts(session: Session, probe_id: int) -> int:
    done = session.exec(select(func.coalesce(func.sum(ProbeShard.end_position - ProbeShard.first_position), 0))
                        .where(ProbeShard.probe_id == probe_id, ProbeShard.completed_at.is_not(None))).one()
    return int(done)


def _start(probe_id: int, shard_index: int) -> ShardWork | str:
    with session_scope() as session:
        probe = session.get(Probe, probe_id)
        if probe is None:
            raise ProbeFailure(f"Probe {probe_id} does not exist (deleted?); nothing to run.")
        shard = session.get(ProbeShard, (probe_id, shard_index))
        if shard is None:
            raise ProbeFailure(f"Probe {probe_id} has no shard {shard_index}.")
        if shard.completed_at is not None:
            return SKIPPED
        job = lock_job(session, probe.job_id)
        status = JobStatus(job.status)
        if status in FINISHED:
            return CANCELLED
        if status == JobStatus.cancelling:
            transition(session, job, JobStatus.cancelled, f"cancel requested; shard {shard_index} not started")
            return CANCELLED
        if status == JobStatus.queued:
            transition(session, job, JobStatus.running, f"shard {shard_index} started")
        shard_count = session.exec(select(func.count()).select_from(ProbeShard)
                                   .where(ProbeShard.probe_id == probe_id)).one()
        job.progress_total = job.progress_total or probe.prompt_count
        job.message = f"shard {shard_index + 1}/{shard_count}: loading {probe.model}"
        job.heartbeat_at = utcnow()
        session.add(job)
        pool = session.get(Pool, probe.pool_id)
        if pool.task_type not in TASK_TYPES:
            raise ProbeFailure(f"Pool {pool.id} has task type '{pool.task_type}', which cannot be graded; "
                               f"use one of {', '.join(TASK_TYPES)}.")
        rows = session.exec(select(Prompt.id, Prompt.text, Prompt.gold)
                            .where(Prompt.pool_id == probe.pool_id, Prompt.position >= shard.first_position,
                                   Prompt.position < shard.end_position)
                            .order_by(Prompt.position)).all()
        return ShardWork(
            probe_id=probe_id, job_id=probe.job_id, shard_index=shard_index, shard_count=shard_count,
            first_position=shard.first_position, model=probe.model, k=probe.k, temperature=probe.temperature,
            max_new_tokens=probe.max_new_tokens, template=probe.template,
            chat_template_options=probe.chat_template_options, grading_policy=probe.grading_policy, seed=probe.seed,
            label_free=probe.label_free, task_type=pool.task_type, prompt_ids=[r[0] for r in rows],
            texts=[r[1] for r in rows], golds=[r[2] for r in rows], progress_total=job.progress_total)


def _report_progress(work: ShardWork, done: int, generation_seconds: float, wall_seconds: float) -> bool:
    """Check for a cancel request and write progress in one short transaction. False: stop now."""
    with session_scope() as session:
        job = lock_job(session, work.job_id)
        status = JobStatus(job.status)
        if status == JobStatus.cancelling:
            transition(session, job, JobStatus.cancelled,
                       f"cancel requested; stopped in shard {work.shard_index} after {done} of "
                       f"{len(work.prompt_ids)} prompts (its results were discarded)")
            return False
        if status in FINISHED:  # cancelled, or failed by another shard
            return False
        job.progress_done = min(job.progress_total, _completed_prompts(session, work.probe_id) + done)
        samples_per_second = done * work.k / generation_seconds if generation_seconds > 0 else 0.0
        prompts_per_second = done / wall_seconds if wall_seconds > 0 else 0.0
        remaining = job.progress_total - job.progress_done
        eta = f", ETA {format_duration(remaining / prompts_per_second)}" if prompts_per_second > 0 else ""
        job.message = (f"shard {work.shard_index + 1}/{work.shard_count}: {done}/{len(work.prompt_ids)} prompts, "
                       f"{samples_per_second:.1f} samples/s{eta}")
        job.heartbeat_at = utcnow()
        session.add(job)
        return True


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


def _commit_shard(work: ShardWork, samples: list[dict], scores: list[dict], seconds: float) -> str:
    """Write the shard's results and mark it completed, all or nothing; finish the job if it was the last."""
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
        # Locked last (progress updates lock only the job), so two finishing shards serialise here
        # and exactly one of them sees every shard completed.
        job = lock_job(session, work.job_id)
        shards = list(session.exec(select(ProbeShard).where(ProbeShard.probe_id == work.probe_id)
                                   .execution_options(populate_existing=True)))
        status = JobStatus(job.status)
        if all(s.completed_at is not None for s in shards):
            probe = session.get(Probe, work.probe_id)
            total_samples = sum((s.end_position - s.first_position) * probe.k for s in shards)
            total_seconds = sum(s.seconds or 0.0 for s in shards)
            probe.samples_per_second = total_samples / total_seconds if total_seconds > 0 else None
            session.add(probe)
            job.progress_done = job.progress_total
            rate = f", {probe.samples_per_second:.1f} samples/s" if probe.samples_per_second else ""
            if status not in FINISHED:
                job.message = f"done: {probe.prompt_count} prompts x {probe.k} samples{rate}"
                if status == JobStatus.queued:
                    transition(session, job, JobStatus.running, f"shard {work.shard_index} finished")
                transition(session, job, JobStatus.succeeded, f"all {len(shards)} shards completed")
        elif status not in FINISHED:
            done = sum(s.end_position - s.first_position for s in shards if s.completed_at is not None)
            job.progress_done = min(job.progress_total, done)
            job.message = (f"shard {work.shard_index + 1}/{len(shards)} done; {done}/{job.progress_total} "
                           f"prompts probed")
            job.heartbeat_at = utcnow()
        session.add(job)
    return COMPLETED


def _run_shard(probe_id: int, shard_index: int, engine: GenerationEngine | None,
               engine_factory: Callable[[str], GenerationEngine] | None) -> str:
    work = _start(probe_id, shard_index)
    if isinstance(work, str):
        return work
    if engine is None:
        if engine_factory is None:
            from worker.engines import get_engine as engine_factory
        engine = engine_factory(work.model)
    rendered = engine.render(work.texts, work.template, work.chat_template_options)
    chunk = max(1, engine.prompts_per_batch(work.k))
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
        if not _report_progress(work, len(completions), generation_seconds, time.perf_counter() - started):
            return CANCELLED
    samples, scores = grade_shard(work, completions)
    return _commit_shard(work, samples, scores, generation_seconds)
