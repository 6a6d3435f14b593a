"""Re-grade a pool's stored probe samples against the answers its prompts have now: no new generation.

Every sample keeps the answer extracted from it, so a changed gold answer only needs `is_correct` again
and the prompt's score recomputed. A probe whose prompts now all have gold answers ranks by pass rate
(`label_free` becomes False), and by agreement again should an undo take answers away."""

from collections.abc import Callable, Sequence

from sqlalchemy import bindparam, func, update
from sqlmodel import Session, select

from backend.curation.grading import grade_answers, question_options
from backend.curation.scores import score_prompt
from backend.jobs.tables import Job, JobStatus
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe, PromptScore, Sample

BATCH_PROMPTS = 500
Progress = Callable[[int, int], bool]  # (samples done, samples in all) -> go on

_SCORE = PromptScore.__table__
_SAMPLE = Sample.__table__
_SCORE_FIELDS = ("correct_count", "pass_rate", "wilson_low", "wilson_high", "base_wrong", "difficulty")
# Bound names differ from the columns': SQLAlchemy reserves a column's own name for its SET value.
_UPDATE_SCORE = (update(_SCORE)
                 .where(_SCORE.c.probe_id == bindparam("p_probe"), _SCORE.c.prompt_id == bindparam("p_prompt"))
                 .values({name: bindparam("v_" + name) for name in _SCORE_FIELDS}))
_UPDATE_SAMPLE = update(_SAMPLE).where(_SAMPLE.c.id == bindparam("s_id")).values(correct=bindparam("v_correct"))


def running_probe_jobs(session: Session, pool_id: int) -> list[int]:
    """Jobs of the pool's probes that are still generating: their shards read answers as they start."""
    active = [JobStatus.queued.value, JobStatus.running.value, JobStatus.cancelling.value]
    return list(session.exec(select(Job.id).join(Probe, Probe.job_id == Job.id)
                             .where(Probe.pool_id == pool_id, Job.status.in_(active))))


def unlabeled_count(session: Session, pool_id: int) -> int:
    return session.exec(select(func.count()).select_from(Prompt)
                        .where(Prompt.pool_id == pool_id, Prompt.gold.is_(None))).one()


def samples_to_regrade(session: Session, pool_id: int, prompt_ids: Sequence[int]) -> int:
    """Stored samples of these prompts across the pool's probes (all of a probe's, where its basis flips)."""
    return _sample_total(_probes(session, pool_id), unlabeled_count(session, pool_id) > 0, len(prompt_ids))


def _probes(session: Session, pool_id: int) -> list[Probe]:
    return list(session.exec(select(Probe).where(Probe.pool_id == pool_id).order_by(Probe.id)))


def _sample_total(probes: list[Probe], label_free: bool, prompts: int) -> int:
    """Samples to re-grade: a probe's own count when it drew fewer than k of every prompt (adaptive), scaled to the
    prompts re-graded."""
    def samples(probe: Probe) -> float:
        share = 1.0 if probe.label_free != label_free else prompts / max(probe.prompt_count, 1)
        return share * (probe.samples_drawn or probe.prompt_count * probe.k)

    return round(sum(samples(probe) for probe in probes))


def lock_pool(session: Session, pool_id: int) -> None:
    """The pool row, locked until commit on Postgres: imports, undos and re-grading batches of one pool
    take turns, so each reads the answers the others left."""
    session.exec(select(Pool.id).where(Pool.id == pool_id).with_for_update()).one()


def regrade_pool(session: Session, pool: Pool, prompt_ids: Sequence[int], progress: Progress | None = None
                 ) -> dict | None:
    """Re-grade every probe of the pool for these prompts (all prompts of a probe whose basis flips).
    Writes in the caller's transaction. Returns {"probes": n, "samples": n}, or None when `progress`
    asked to stop."""
    label_free = unlabeled_count(session, pool.id) > 0
    probes = _probes(session, pool.id)
    total = _sample_total(probes, label_free, len(prompt_ids))
    done = 0
    for probe in probes:
        ids = list(prompt_ids)
        if probe.label_free != label_free:
            ids = list(session.exec(select(PromptScore.prompt_id).where(PromptScore.probe_id == probe.id)))
        for start in range(0, len(ids), BATCH_PROMPTS):
            done += _regrade_batch(session, probe, pool.task_type, ids[start:start + BATCH_PROMPTS], label_free)
            _scores_changed(session, probe.id, label_free)
            if progress is not None and not progress(done, total):
                return None
    session.flush()
    return {"probes": len(probes), "samples": done}


def _scores_changed(session: Session, probe_id: int, label_free: bool) -> None:
    # In SQL, not read-modify-write: two re-grades that overlap still give two revisions (the cache key).
    session.execute(update(Probe).where(Probe.id == probe_id)
                    .values(label_free=label_free, scores_revision=Probe.scores_revision + 1))


def _regrade_batch(session: Session, probe: Probe, task_type: str, prompt_ids: list[int], label_free: bool) -> int:
    # The ids are rendered into the SQL: a statement psycopg prepares after a few batches gets a generic
    # plan, which Postgres (with stale statistics) ran as a scan of the probe's samples (bench/regrade_speed.py).
    ids = bindparam("ids", [int(i) for i in prompt_ids], expanding=True, literal_execute=True)
    prompts = {pid: (text, gold) for pid, text, gold in session.exec(
        select(Prompt.id, Prompt.text, Prompt.gold).where(Prompt.id.in_(ids)))}
    samples: dict[int, list[tuple[int, str | None]]] = {}
    for sample_id, prompt_id, extracted in session.exec(
            select(Sample.id, Sample.prompt_id, Sample.extracted_answer)
            .where(Sample.probe_id == probe.id, Sample.prompt_id.in_(ids))
            .order_by(Sample.prompt_id, Sample.sample_index)):
        samples.setdefault(prompt_id, []).append((sample_id, extracted))
    score_rows, sample_rows = [], []
    for prompt_id, rows in samples.items():
        text, gold = prompts[prompt_id]
        extracted = [answer for _, answer in rows]
        correct = grade_answers(extracted, gold, task_type, probe.grading_policy, question_options(task_type, text))
        score = score_prompt(extracted, correct, by_agreement=label_free)
        score_rows.append({"p_probe": probe.id, "p_prompt": prompt_id,
                           **{"v_" + name: getattr(score, name) for name in _SCORE_FIELDS}})
        sample_rows.extend({"s_id": sample_id, "v_correct": flag}
                           for (sample_id, _), flag in zip(rows, correct or [None] * len(rows), strict=True))
    connection = session.connection()
    if score_rows:
        connection.execute(_UPDATE_SCORE, score_rows)
        connection.execute(_UPDATE_SAMPLE, sample_rows)
    return len(sample_rows)
