"""The probe job kind's work: run one shard (``run_shard``, what the engine calls with a TaskContext), or a
whole probe in this process (``run_probe``, the CLI's --local and the tests).

A shard is a slice of the pool by prompt position. Its samples and scores are written in one transaction
together with the shard's ``completed_at`` and its task's completion, so a shard that crashes leaves nothing
behind and a rerun never double counts; a rerun of a completed shard is skipped. After each batch the shard
beats (progress, its lease, a cancel check). The shard that completes the probe records the probe's
samples/s and the job succeeds. Failures and retries are the engine's (backend.jobs.engine).

An adaptive probe (``probe.adaptive``, backend.curation.adaptive) runs in rounds: the first round's shards draw
``first_round`` samples of every prompt; the shard that completes a round applies the stop rule to every
prompt's counts and, in the same transaction, adds the next round's shards (the prompts still open) and their
tasks, sent after the commit. Their samples extend each prompt's, and its score is recomputed from all of them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy import delete, func, insert
from sqlmodel import Session, select

from backend.curation.adaptive import StopRule, drawn_by, open_prompts, rounds_at_most
from backend.curation.grading import TASK_TYPES, extract_answer, grade_answers, question_options
from backend.curation.scores import score_prompt
from backend.database import session_scope
from backend.jobs.dispatch import add_task, send_unsent
from backend.jobs.engine import JobFailure, TaskContext, execute, owner_name, run_here
from backend.jobs.service import transition
from backend.jobs.tables import Job, JobStatus, JobTask
from backend.pools.tables import Pool, Prompt
from backend.probes.kind import PROBE
from backend.probes.service import shard_size_for
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
    probe_job_id: int
    shard_index: int
    shard_number: int  # 1-based within its round
    shard_count: int  # of its round
    first_position: int
    model: str
    adapter: str | None  # a run's LoRA adapter applied to the model (a re-probe), or None
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
    positions: list[int]
    texts: list[str]
    golds: list[str | None]
    prompt_count: int  # of the whole probe
    round: int = 1
    draws: list[int] | None = None  # samples each prompt gets in this shard (None: k each)
    # an adaptive probe's later rounds: each prompt's earlier samples (extracted answer, correct), which its
    # score is recomputed with
    earlier: list[list[tuple[str | None, bool | None]]] | None = None

    def draws_of(self, index: int) -> int:
        return self.k if self.draws is None else self.draws[index]

    def first_sample(self, index: int) -> int:
        return 0 if self.earlier is None else len(self.earlier[index])


# --- entry points ----------------------------------------------------------------------------------


def run_shard(ctx: TaskContext) -> str:
    """The kind's run function: probe the shard named by ctx.args."""
    work = _read_work(ctx.args["probe_id"], ctx.args["shard_index"])
    if isinstance(work, str):
        return work
    return _probe(ctx, work, _engine(work.model, work.adapter))


def load_engine(args: dict) -> None:
    """The kind's prepare function: load the probe's model (cached per process) before the claim."""
    with session_scope() as session:
        probe = session.get(Probe, args["probe_id"])
        model = probe.model if probe else None
        adapter = probe.adapter_path if probe else None
    if model is not None and (adapter is None or Path(adapter).is_dir()):
        _engine(model, adapter)


def _check_adapter(probe: Probe) -> str | None:
    """The LoRA adapter directory a run's re-probe applies (None for a probe of the model itself)."""
    if probe.adapter_path is not None and not Path(probe.adapter_path).is_dir():
        raise JobFailure(f"The trained adapter this probe applies is no longer at {probe.adapter_path}. Train the "
                         "run again, or restore BUDGETLAB_ARTIFACT_DIR.")
    return probe.adapter_path


def _engine(model: str, adapter: str | None = None) -> GenerationEngine:
    engine = getattr(_override, "engine", None)
    if engine is None:
        from worker.engines import get_engine

        engine = get_engine(model, adapter)
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


def _progress(session: Session, probe_id: int, adaptive: bool) -> int:
    """The job's progress: prompts of completed shards; for an adaptive probe, samples drawn (its total is
    prompts x k, the most it can draw)."""
    if adaptive:
        return int(session.exec(select(func.coalesce(func.sum(PromptScore.k), 0))
                                .where(PromptScore.probe_id == probe_id)).one())
    shards = session.exec(select(ProbeShard).execution_options(populate_existing=True)
                          .where(ProbeShard.probe_id == probe_id, ProbeShard.completed_at.is_not(None))).all()
    return sum(shard.size for shard in shards)


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
        round_shards = session.exec(select(ProbeShard.shard_index)
                                    .where(ProbeShard.probe_id == probe_id, ProbeShard.round == shard.round)).all()
        query = (select(Prompt.id, Prompt.text, Prompt.gold, Prompt.position)
                 .where(Prompt.pool_id == probe.pool_id, Prompt.position >= shard.first_position,
                        Prompt.position < shard.end_position).order_by(Prompt.position))
        if shard.prompt_ids is not None:
            query = query.where(Prompt.id.in_(shard.prompt_ids))
        rows = session.exec(query).all()
        prompt_ids = [r[0] for r in rows]
        draws = earlier = None
        if probe.adaptive is not None:
            rule = StopRule.from_dict(probe.adaptive)
            earlier = _earlier_samples(session, probe_id, prompt_ids) if shard.round > 1 else None
            target = drawn_by(rule, shard.round)
            draws = [target - (len(earlier[i]) if earlier else 0) for i in range(len(rows))]
        return ShardWork(
            probe_id=probe_id, probe_job_id=probe.job_id, shard_index=shard_index,
            shard_number=shard_index - min(round_shards) + 1, shard_count=len(round_shards),
            first_position=shard.first_position, model=probe.model, adapter=_check_adapter(probe),
            k=probe.k, temperature=probe.temperature,
            max_new_tokens=probe.max_new_tokens, template=probe.template,
            chat_template_options=probe.chat_template_options, grading_policy=probe.grading_policy, seed=probe.seed,
            label_free=probe.label_free, task_type=pool.task_type, prompt_ids=prompt_ids,
            positions=[r[3] for r in rows], texts=[r[1] for r in rows], golds=[r[2] for r in rows],
            prompt_count=probe.prompt_count, round=shard.round, draws=draws, earlier=earlier)


def _earlier_samples(session: Session, probe_id: int, prompt_ids: list[int]) -> list[list[tuple]]:
    by_prompt: dict[int, list[tuple]] = {pid: [] for pid in prompt_ids}
    for prompt_id, answer, correct in session.exec(
            select(Sample.prompt_id, Sample.extracted_answer, Sample.correct)
            .where(Sample.probe_id == probe_id, Sample.prompt_id.in_(prompt_ids))
            .order_by(Sample.prompt_id, Sample.sample_index)):
        by_prompt[prompt_id].append((answer, correct))
    return [by_prompt[pid] for pid in prompt_ids]


def _beat(ctx: TaskContext, work: ShardWork, done: int, samples: int, before: int, generation_seconds: float,
          wall_seconds: float) -> bool:
    """Progress after a batch: what the committed shards did (`before`, `_progress`) plus this shard's; False:
    stop. An adaptive probe's rounds have no ETA: how many prompts stay open is not known in advance."""
    samples_per_second = samples / generation_seconds if generation_seconds > 0 else 0.0
    adaptive = work.draws is not None
    prompts_per_second = done / wall_seconds if wall_seconds > 0 else 0.0
    remaining = work.prompt_count - before - done
    eta = f", ETA {format_duration(remaining / prompts_per_second)}" if prompts_per_second > 0 and not adaptive else ""
    where = f"round {work.round}, " if adaptive else ""
    return ctx.beat(done=before + (samples if adaptive else done), message=(
        f"{where}shard {work.shard_number}/{work.shard_count}: {done}/{len(work.prompt_ids)} prompts, "
        f"{samples_per_second:.1f} samples/s{eta}"),
        stopped=f"in shard {work.shard_index} after {done} of {len(work.prompt_ids)} prompts (its results were "
                "discarded)")


def storable_text(text: str) -> str:
    """Models can emit a NUL byte (a byte-fallback token); Postgres text cannot hold one."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def grade_shard(work: ShardWork, completions: list[list[str]]) -> tuple[list[dict], list[dict]]:
    """Sample rows and prompt-score rows (as dicts for a bulk insert) for the shard's completions; in an adaptive
    probe's later round, the scores count each prompt's earlier samples too."""
    samples: list[dict] = []
    scores: list[dict] = []
    for index, (prompt_id, question, gold, outs) in enumerate(
            zip(work.prompt_ids, work.texts, work.golds, completions, strict=True)):
        outs = [storable_text(text) for text in outs]
        options = question_options(work.task_type, question)
        extracted = [extract_answer(text, work.task_type, policy=work.grading_policy, options=options)
                     for text in outs]
        # Prompts with gold answers get pass rates; in a label-free probe (some prompts have none)
        # difficulty stays on the one scale every prompt has, agreement.
        correct = grade_answers(extracted, gold, work.task_type, work.grading_policy, options)
        first = work.first_sample(index)
        for offset, (text, answer) in enumerate(zip(outs, extracted, strict=False)):
            samples.append({"probe_id": work.probe_id, "prompt_id": prompt_id, "sample_index": first + offset,
                            "completion": text, "extracted_answer": answer,
                            "correct": None if correct is None else correct[offset]})
        if first:
            earlier_answers, earlier_correct = zip(*work.earlier[index], strict=True)
            extracted = [*earlier_answers, *extracted]
            correct = None if correct is None else [*earlier_correct, *correct]
        score = score_prompt(extracted, correct, by_agreement=work.label_free)
        scores.append({"probe_id": work.probe_id, "prompt_id": prompt_id, "k": score.k,
                       "correct_count": score.correct_count, "pass_rate": score.pass_rate,
                       "wilson_low": score.wilson_low, "wilson_high": score.wilson_high,
                       "agreement": score.agreement, "majority_answer": score.majority_answer,
                       "base_wrong": score.base_wrong, "difficulty": score.difficulty})
    return samples, scores


def _commit(ctx: TaskContext, work: ShardWork, samples: list[dict], scores: list[dict], seconds: float) -> str:
    """Write the shard's results, mark it and its task completed, all or nothing. The last shard of a round of an
    adaptive probe adds the next round (its tasks are sent after the commit); the last shard of all finishes the
    job."""
    # The stop rule takes seconds: when this looks like its round's last shard, it runs before the transaction
    # (which locks the job, and on SQLite the database), on the counts the commit will leave.
    plan = _open_after(work, scores) if work.draws is not None and _last_of_round(work) else None
    next_round = False
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
            if work.earlier is not None:  # the prompts' scores from earlier rounds make way for these
                connection.execute(delete(PromptScore.__table__).where(
                    PromptScore.probe_id == work.probe_id, PromptScore.prompt_id.in_(work.prompt_ids)))
            connection.execute(insert(PromptScore.__table__), scores)
        shard.completed_at = utcnow()
        shard.seconds = seconds
        session.add(shard)
        session.flush()
        job = ctx.complete(session)  # locks the job: two finishing shards serialise, one of them is last
        probe = session.get(Probe, work.probe_id)
        adaptive = probe.adaptive is not None
        if job is None:
            done = _progress(session, work.probe_id, adaptive)
            what = f"round {work.round}: shard" if adaptive else "shard"
            so_far = f"{done} samples drawn" if adaptive else f"{done}/{work.prompt_count} prompts probed"
            ctx.note_progress(session, done=done,
                              message=f"{what} {work.shard_number}/{work.shard_count} done; {so_far}")
            return COMPLETED
        if adaptive:
            open_rows = plan if plan is not None else _open_prompts(session, probe, work.round)
            if open_rows and job.status == JobStatus.cancelling.value:  # the next round is not started
                job.message = f"cancelled: stopped after round {work.round} (its results are kept)"
                transition(session, job, JobStatus.cancelled, f"cancel requested; stopped after round {work.round}")
                return CANCELLED
            next_round = _add_next_round(session, ctx, job, probe, work.round, open_rows)
        if not next_round:
            _finish(session, ctx, job, probe)
    if next_round and ctx.sends_new_tasks:
        with session_scope() as session:
            send_unsent(session, job_ids=[work.probe_job_id])
    return COMPLETED


def _last_of_round(work: ShardWork) -> bool:
    with session_scope() as session:
        return not session.exec(select(ProbeShard.shard_index).where(
            ProbeShard.probe_id == work.probe_id, ProbeShard.round == work.round,
            ProbeShard.completed_at.is_(None), ProbeShard.shard_index != work.shard_index)).first()


def _open_after(work: ShardWork, scores: list[dict]) -> list[tuple[int, int]]:
    with session_scope() as session:
        return _open_prompts(session, session.get(Probe, work.probe_id), work.round,
                             {row["prompt_id"]: (row["correct_count"], row["k"]) for row in scores})


def _open_prompts(session: Session, probe: Probe, round_index: int,
                  overlay: dict[int, tuple[int | None, int]] | None = None) -> list[tuple[int, int]]:
    """(prompt id, position) of the prompts the stop rule leaves open after round ``round_index``, by position;
    ``overlay``: counts that replace the stored ones (a shard's, before its commit). The rule sees the prompts in
    prompt-id order, the order the selection breaks ties in (backend.probes.score_arrays). A prompt without a
    pass rate (its gold answer was removed meanwhile) is left out."""
    rule = StopRule.from_dict(probe.adaptive)
    rows = session.exec(select(PromptScore.prompt_id, PromptScore.correct_count, PromptScore.k, Prompt.position)
                        .join(Prompt, Prompt.id == PromptScore.prompt_id)
                        .where(PromptScore.probe_id == probe.id).order_by(PromptScore.prompt_id)).all()
    overlay = overlay or {}
    rows = [(pid, *overlay.get(pid, (c, k)), position) for pid, c, k, position in rows]
    rows = [row for row in rows if row[1] is not None]
    if not rows:
        return []
    opened = open_prompts(rule, np.array([r[1] for r in rows]), np.array([r[2] for r in rows]), round_index)
    return sorted(((row[0], row[3]) for row, is_open in zip(rows, opened, strict=True) if is_open),
                  key=lambda row: row[1])


def _finish(session: Session, ctx: TaskContext, job: Job, probe: Probe) -> None:
    """Record what the probe drew and how fast, and succeed its job."""
    total_seconds = session.exec(select(func.coalesce(func.sum(ProbeShard.seconds), 0.0))
                                 .where(ProbeShard.probe_id == probe.id)).one()
    full = probe.prompt_count * probe.k
    if probe.adaptive is None:
        probe.samples_drawn = full
        drawn = f"{probe.prompt_count} prompts x {probe.k} samples"
    else:
        probe.samples_drawn = int(session.exec(select(func.coalesce(func.sum(PromptScore.k), 0))
                                               .where(PromptScore.probe_id == probe.id)).one())
        rounds = session.exec(select(func.max(ProbeShard.round)).where(ProbeShard.probe_id == probe.id)).one()
        job.progress_total = probe.samples_drawn  # it drew what it needed: done
        drawn = (f"{probe.prompt_count} prompts, {probe.samples_drawn} of {full} samples "
                 f"({1 - probe.samples_drawn / full:.0%} saved) in {rounds} round{'s' if rounds != 1 else ''}")
    probe.samples_per_second = probe.samples_drawn / total_seconds if total_seconds > 0 else None
    session.add(probe)
    rate = f", {probe.samples_per_second:.1f} samples/s" if probe.samples_per_second else ""
    ctx.succeed(session, job, f"done: {drawn}{rate}")


def _add_next_round(session: Session, ctx: TaskContext, job: Job, probe: Probe, round_index: int,
                    open_rows: list[tuple[int, int]]) -> bool:
    """Shards and tasks of round ``round_index + 1`` for the prompts left open (id, position); False when none is
    (the probe is done)."""
    if not open_rows:
        return False
    size = shard_size_for(len(open_rows), probe.shard_size)
    index = session.exec(select(func.max(ProbeShard.shard_index)).where(ProbeShard.probe_id == probe.id)).one() + 1
    for start in range(0, len(open_rows), size):
        chunk = open_rows[start:start + size]
        session.add(ProbeShard(probe_id=probe.id, shard_index=index, first_position=chunk[0][1],
                               end_position=chunk[-1][1] + 1, round=round_index + 1,
                               prompt_ids=[prompt_id for prompt_id, _ in chunk]))
        session.flush()
        add_task(session, PROBE, job, shard_label(index), {"probe_id": probe.id, "shard_index": index})
        index += 1
    drawn = _progress(session, probe.id, adaptive=True)
    ctx.note_progress(session, done=drawn, message=(
        f"round {round_index + 1} of at most {rounds_at_most(StopRule.from_dict(probe.adaptive))}: "
        f"{len(open_rows)} of {probe.prompt_count} prompts still open; {drawn} samples drawn so far"))
    return True


def _probe(ctx: TaskContext, work: ShardWork, engine: GenerationEngine) -> str:
    rendered = engine.render(work.texts, work.template, work.chat_template_options)
    with session_scope() as session:
        before = _progress(session, work.probe_id, adaptive=work.draws is not None)
    if not ctx.beat(done=before, message=f"shard {work.shard_number}/{work.shard_count}: {work.model} loaded",
                    stopped=f"in shard {work.shard_index} before its first batch"):
        return CANCELLED
    completions: list[list[str] | None] = [None] * len(rendered)
    done = samples = 0
    generation_seconds = 0.0
    started = time.perf_counter()
    # Prompts that need the same number of samples share batches (in a later round, a reopened prompt catching
    # up needs more than the others).
    for draws in sorted({work.draws_of(i) for i in range(len(rendered))}):
        indexes = [i for i in range(len(rendered)) if work.draws_of(i) == draws]
        chunk = max(1, engine.prompts_per_batch(draws))
        for start in range(0, len(indexes), chunk):
            batch = indexes[start:start + chunk]
            # the first round keeps the seeds of a probe without rounds; later rounds draw from streams of their own
            seed = derive_seed(work.seed, *((work.round,) if work.round > 1 else ()), work.positions[batch[0]])
            t0 = time.perf_counter()
            outputs = engine.generate([rendered[i] for i in batch], k=draws, temperature=work.temperature,
                                      max_new_tokens=work.max_new_tokens, seed=seed)
            generation_seconds += time.perf_counter() - t0
            if len(outputs) != len(batch) or any(len(outs) != draws for outs in outputs):
                raise RuntimeError(f"the {type(engine).__name__} returned {len(outputs)} prompts' completions for "
                                   f"{len(batch)} prompts (k={draws})")
            for i, outs in zip(batch, outputs, strict=True):
                completions[i] = outs
            done, samples = done + len(batch), samples + draws * len(batch)
            if not _beat(ctx, work, done, samples, before, generation_seconds, time.perf_counter() - started):
                return CANCELLED
    samples_rows, scores = grade_shard(work, completions)
    return _commit(ctx, work, samples_rows, scores, generation_seconds)
