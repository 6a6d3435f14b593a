"""Label sets: import answers into a pool (whole or not at all), undo an import, count what is labeled.

An import writes, in one transaction: the label set, one `PromptLabel` per prompt it answered (with
the answer it replaced, the same one for a confirmation), the prompts' new answers, and, when the stored samples to
re-grade are few (BUDGETLAB_REGRADE_INLINE_SAMPLES), the re-graded scores. More than that, and a
re-grading job does it after the commit."""

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, func, update
from sqlmodel import Session, select

from backend.errors import AppError
from backend.jobs.dispatch import add_task
from backend.jobs.service import create_job
from backend.jobs.tables import Job
from backend.labels import regrade
from backend.labels.formats import ParsedLabels
from backend.labels.kind import LABEL_KINDS
from backend.labels.resolve import PROBLEMS, resolve
from backend.labels.tables import LabelingExport, LabelJob, LabelSet, PromptLabel
from backend.pools.tables import Pool, Prompt
from backend.settings import get_settings
from backend.timeutil import utcnow

_ID_CHUNK = 1000
_PROMPT = Prompt.__table__
_SET_ANSWER = (update(_PROMPT).where(_PROMPT.c.id == bindparam("p_id"))
               .values(answer=bindparam("v_answer"), gold=bindparam("v_gold")))


@dataclass
class ImportOutcome:
    report: dict
    label_set: LabelSet | None  # None: a dry run, or a re-grade on request
    regrade_job_id: int | None = None  # a re-grading job to send once the caller commits


def get_label_set(session: Session, label_set_id: int) -> LabelSet:
    label_set = session.get(LabelSet, label_set_id)
    if label_set is None:
        raise AppError(404, f"Label set {label_set_id} does not exist; a pool's label sets are listed by "
                            "GET /api/pools/{pool_id}/labels.")
    return label_set


def _refuse_while_probing(session: Session, pool: Pool, doing: str) -> None:
    regrade.lock_pool(session, pool.id)  # imports into one pool take turns: each records what it replaced
    jobs = regrade.running_probe_jobs(session, pool.id)
    if jobs:
        raise AppError(409, f"A probe of pool {pool.id} is still running (job {', '.join(map(str, jobs))}); its "
                            f"shards read the answers as they start, so {doing} now would grade them unevenly. "
                            "Wait for it to finish, or cancel it, then try again.")


def _prompts_by_external_id(session: Session, pool_id: int, ids: Sequence[str]) -> dict[str, tuple[int, str | None,
                                                                                                 str | None]]:
    found: dict[str, tuple[int, str | None, str | None]] = {}
    for start in range(0, len(ids), _ID_CHUNK):
        chunk = ids[start:start + _ID_CHUNK]
        for prompt_id, external_id, answer, gold in session.exec(
                select(Prompt.id, Prompt.external_id, Prompt.answer, Prompt.gold)
                .where(Prompt.pool_id == pool_id, Prompt.external_id.in_(chunk))):
            found[external_id] = (prompt_id, answer, gold)
    return found


def _example_ids(session: Session, pool_id: int) -> list[str]:
    return list(session.exec(select(Prompt.external_id).where(Prompt.pool_id == pool_id)
                             .order_by(Prompt.position).limit(3)))


def import_labels(session: Session, pool: Pool, parsed: ParsedLabels, source: str, token_name: str | None, *,
                  dry_run: bool = False) -> ImportOutcome:
    """Match annotations to the pool's prompts by external id, settle several annotators by majority, and
    (unless `dry_run`) write the answers that changed as one label set, re-grading the pool's probes."""
    _refuse_while_probing(session, pool, "importing labels")
    ids = list(dict.fromkeys(note.external_id for note in parsed.annotations))
    prompts = _prompts_by_external_id(session, pool.id, [i for i in ids if "\x00" not in i])  # no NUL in Postgres
    resolution = resolve(parsed.annotations, set(prompts), pool.task_type)
    if not prompts:
        raise AppError(422, f"None of the {len(ids)} ids in '{source}' is a prompt of pool {pool.id} "
                            f"('{pool.name}'): is it the labels file of another pool? The file's ids begin "
                            f"{', '.join(ids[:3]) or '(none)'}; this pool's begin "
                            f"{', '.join(_example_ids(session, pool.id))}. Nothing was imported.",
                       details={"unknown_ids": ids[:20]})
    rows = []  # (prompt_id, resolved, previous answer, previous gold), in the file's order
    for external_id, resolved in resolution.answers.items():
        prompt_id, answer, gold = prompts[external_id]
        rows.append((prompt_id, resolved, answer, gold))
    changes = [row for row in rows if row[1].answer != row[2] or row[1].gold != row[3]]
    report = {**resolution.report(), "format": parsed.format, "task_type": pool.task_type,
              "new": sum(previous is None for _, _, previous, _ in changes),
              "changed": sum(previous is not None for _, _, previous, _ in changes),
              "unchanged": len(rows) - len(changes), "dry_run": dry_run}
    if not rows:
        raise AppError(422, _nothing_usable(source, pool, resolution.report()), details={"report": report})
    if dry_run:
        return ImportOutcome(report=report, label_set=None)
    # Confirmed answers are recorded too: undoing an earlier import must not take away an answer a later
    # one gave again.
    label_set = LabelSet(pool_id=pool.id, source=source[:500], format=parsed.format, token_name=token_name,
                         label_count=len(rows), changed_count=report["changed"], report=report)
    session.add(label_set)
    session.flush()
    session.connection().execute(PromptLabel.__table__.insert(), [
        {"label_set_id": label_set.id, "prompt_id": prompt_id, "answer": resolved.answer, "gold": resolved.gold,
         "previous_answer": answer, "previous_gold": gold, "annotations": resolved.annotations,
         "agreeing": resolved.agreeing} for prompt_id, resolved, answer, gold in rows])
    outcome = ImportOutcome(report=report, label_set=label_set)
    if not changes:
        return outcome
    _set_answers(session, [(prompt_id, resolved.answer, resolved.gold) for prompt_id, resolved, _, _ in changes])
    outcome.regrade_job_id = _after_answers_changed(session, pool, [prompt_id for prompt_id, *_ in changes],
                                                    token_name, report)
    session.add(label_set)
    session.flush()
    return outcome


def _nothing_usable(source: str, pool: Pool, report: dict) -> str:
    problems = [f"{report[key]['count']} {words}" for key, words in PROBLEMS.items() if report[key]["count"]]
    example = ""
    if report["ungradeable"]["examples"]:
        first = report["ungradeable"]["examples"][0]
        example = f" (e.g. '{first['answer']}' for {first['id']}, {first['line']})"
    return (f"'{source}' has no answer that can be imported into pool {pool.id}: {', '.join(problems)}{example}. "
            f"Nothing was imported; fix the file (answers must suit task type '{pool.task_type}') and import it "
            "again.")


def _set_answers(session: Session, rows: list[tuple[int, str | None, str | None]]) -> None:
    session.connection().execute(_SET_ANSWER, [{"p_id": pid, "v_answer": answer, "v_gold": gold}
                                               for pid, answer, gold in rows])


def _after_answers_changed(session: Session, pool: Pool, prompt_ids: list[int], token_name: str | None,
                           report: dict) -> int | None:
    """Keep `has_answers` true to the prompts, and re-grade the stored samples now or in a job."""
    pool.has_answers = regrade.unlabeled_count(session, pool.id) == 0
    session.add(pool)
    session.flush()
    samples = regrade.samples_to_regrade(session, pool.id, prompt_ids)
    if samples <= get_settings().regrade_inline_samples:
        report["regraded"] = regrade.regrade_pool(session, pool, prompt_ids)
        return None
    job = create_label_job(session, "regrade", pool.id, None, token_name, total=samples, prompt_ids=prompt_ids)
    report["regrade_job_id"] = job.id
    return job.id


def create_label_job(session: Session, action: str, pool_id: int, subset_id: int | None, token_name: str | None,
                     total: int = 0, prompt_ids: list[int] | None = None) -> Job:
    """A queued labeling job (push, pull or regrade), what it works on and its task; the caller commits and sends."""
    kind = LABEL_KINDS[action]
    job = create_job(session, kind.name, total=total)
    session.add(LabelJob(job_id=job.id, action=action, pool_id=pool_id, subset_id=subset_id, prompt_ids=prompt_ids,
                         token_name=token_name))
    session.flush()
    add_task(session, kind, job, f"the {action}", {})
    return job


def regrade_all(session: Session, pool: Pool, token_name: str | None) -> ImportOutcome:
    """Re-grade every stored sample of the pool against its answers now: what an import does for the prompts
    it changed, for all of them (after a re-grading job failed, or could not be queued)."""
    _refuse_while_probing(session, pool, "re-grading")
    prompt_ids = list(session.exec(select(Prompt.id).where(Prompt.pool_id == pool.id).order_by(Prompt.id)))
    report: dict = {}
    outcome = ImportOutcome(report=report, label_set=None)
    outcome.regrade_job_id = _after_answers_changed(session, pool, prompt_ids, token_name, report)
    return outcome


def undo(session: Session, label_set: LabelSet, token_name: str | None) -> ImportOutcome:
    """Put back the answers this import replaced. A prompt a later import changed again keeps that later
    answer; the later import's history then records what this one replaced, so it can be undone too."""
    pool = session.get(Pool, label_set.pool_id)
    _refuse_while_probing(session, pool, "undoing labels")  # locks the pool: a second undo waits, then sees it
    session.refresh(label_set)
    if label_set.undone_at is not None:
        raise AppError(409, f"Label set {label_set.id} was already undone at {label_set.undone_at:%Y-%m-%d %H:%M} "
                            f"UTC (by {label_set.undone_by or 'an unnamed token'}); there is nothing to undo.")
    restored, kept = [], 0
    for row in session.exec(select(PromptLabel).where(PromptLabel.label_set_id == label_set.id)):
        later = session.exec(select(PromptLabel).join(LabelSet, LabelSet.id == PromptLabel.label_set_id)
                             .where(PromptLabel.prompt_id == row.prompt_id, PromptLabel.id > row.id,
                                    LabelSet.undone_at.is_(None))
                             .order_by(PromptLabel.id).limit(1)).first()
        if later is not None:
            later.previous_answer, later.previous_gold = row.previous_answer, row.previous_gold
            session.add(later)
            kept += 1
        elif (row.previous_answer, row.previous_gold) != (row.answer, row.gold):  # a confirmation changes nothing
            restored.append((row.prompt_id, row.previous_answer, row.previous_gold))
    label_set.undone_at = utcnow()
    label_set.undone_by = token_name
    session.add(label_set)
    session.flush()
    report = {"restored": len(restored), "kept_later_answers": kept}
    outcome = ImportOutcome(report=report, label_set=label_set)
    if restored:
        _set_answers(session, restored)
        outcome.regrade_job_id = _after_answers_changed(session, pool, [pid for pid, _, _ in restored], token_name,
                                                        report)
    return outcome


def pool_labels(session: Session, pool: Pool) -> dict:
    """Labeled and unlabeled counts, money spent on labels in effect, label sets and exports (newest first)."""
    labeled = pool.prompt_count - regrade.unlabeled_count(session, pool.id)
    imported = session.exec(select(func.count(func.distinct(PromptLabel.prompt_id)))
                            .join(LabelSet, LabelSet.id == PromptLabel.label_set_id)
                            .where(LabelSet.pool_id == pool.id, LabelSet.undone_at.is_(None))).one()
    label_sets = list(session.exec(select(LabelSet).where(LabelSet.pool_id == pool.id).order_by(LabelSet.id.desc())))
    exports = list(session.exec(select(LabelingExport).where(LabelingExport.pool_id == pool.id)
                                .order_by(LabelingExport.id.desc())))
    return {"pool_id": pool.id, "labeled": labeled, "unlabeled": pool.prompt_count - labeled,
            "imported_labels": imported, "cost_per_label": pool.cost_per_label,
            "spent": None if pool.cost_per_label is None else round(imported * pool.cost_per_label, 2),
            "label_sets": label_sets, "exports": exports}


def record_export(session: Session, pool_id: int, subset_id: int | None, format: str, count: int,
                  token_name: str | None, **extra) -> LabelingExport:
    export = LabelingExport(pool_id=pool_id, subset_id=subset_id, format=format, prompt_count=count,
                            token_name=token_name, **extra)
    session.add(export)
    session.flush()
    return export


