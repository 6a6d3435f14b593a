"""The labeling job kinds' work, run by a worker through the job engine: push a subset to Label Studio, pull
its labels back, and re-grade a pool's samples after a large import. Each beats with its progress."""

import logging

from sqlmodel import Session, select

from backend.database import session_scope
from backend.errors import AppError
from backend.jobs.dispatch import commit_and_send
from backend.jobs.engine import JobFailure, TaskContext
from backend.labels import regrade, service
from backend.labels.connection import client_for
from backend.labels.formats import LabelFileError, label_studio_config, label_studio_tasks, parse_labels
from backend.labels.label_studio import LabelStudioError
from backend.labels.labeling_rows import subset_rows
from backend.labels.tables import LabelingExport, LabelJob
from backend.pools.tables import Pool
from backend.subsets.tables import Subset

log = logging.getLogger(__name__)


def run(ctx: TaskContext) -> str:
    """Run one labeling job to its end: succeeded with a result, or a JobFailure with a message to act on."""
    with session_scope() as session:
        spec = session.get(LabelJob, ctx.job_id)
        if spec is None:
            raise JobFailure(f"Labeling job {ctx.job_id} no longer exists (its pool was deleted?); nothing to do.")
        action, pool_id = spec.action, spec.pool_id
    # A failed re-grade leaves scores behind the answers; say how to bring them level.
    repair = (f" The labels are saved; re-grade with POST /api/pools/{pool_id}/regrade (budgetlab labels regrade "
              f"{pool_id}).") if action == "regrade" else ""
    try:
        return {"push": _push, "pull": _pull, "regrade": _regrade}[action](ctx)
    except _Stopped:
        return "stopped"
    except (LabelStudioError, LabelFileError, AppError) as exc:
        raise JobFailure((exc.message if isinstance(exc, AppError) else str(exc)) + repair) from exc
    except JobFailure:
        raise
    except Exception as exc:
        if repair:
            log.exception("label job %s failed", ctx.job_id)
            raise JobFailure(f"Re-grading failed unexpectedly: {exc}.{repair}") from exc
        raise


def _progress(ctx: TaskContext, done: int, total: int, message: str) -> None:
    if not ctx.beat(done=done, total=total, message=message, stopped=f"after {done} of {total}"):
        raise _Stopped()


class _Stopped(Exception):
    """A cancel (or the job ended elsewhere) between two steps."""


def _finish(ctx: TaskContext, session: Session, result: dict, message: str) -> str:
    spec = session.get(LabelJob, ctx.job_id)
    spec.result = result
    session.add(spec)
    job = ctx.complete(session)
    if job is None:
        return "ended"
    ctx.succeed(session, job, message)
    return "succeeded"


def _push(ctx: TaskContext) -> str:
    job_id = ctx.job_id
    with session_scope() as session:
        spec = session.get(LabelJob, job_id)
        subset = session.get(Subset, spec.subset_id)
        pool = session.get(Pool, spec.pool_id)
        client = client_for(session)
        rows = subset_rows(session, subset)
        title = f"Budgetlab: {pool.name} / {subset.name}"[:50]
        task_type, pool_id, subset_id, token_name = pool.task_type, pool.id, subset.id, spec.token_name
    _progress(ctx, 0, len(rows), f"creating a Label Studio project for {len(rows)} prompts")
    with client:
        project_id = client.create_project(title, label_studio_config(task_type, [row.prompt for row in rows]))
        imported = client.import_tasks(project_id, label_studio_tasks(rows, pool_id), on_progress=lambda done, total: (
            _progress(ctx, done, total, f"imported {done} of {total} tasks into project {project_id}")))
    with session_scope() as session:
        service.record_export(session, pool_id, subset_id, "label-studio-project", imported, token_name,
                              label_studio_project_id=project_id, label_studio_url=client.project_url(project_id),
                              job_id=job_id)
        return _finish(ctx, session, {"project_id": project_id, "project_url": client.project_url(project_id),
                                         "tasks": imported},
                       f"sent {imported} prompts to Label Studio project {project_id}")


def _pull(ctx: TaskContext) -> str:
    job_id = ctx.job_id
    with session_scope() as session:
        spec = session.get(LabelJob, job_id)
        pushed = session.exec(select(LabelingExport).where(LabelingExport.subset_id == spec.subset_id,
                                                           LabelingExport.label_studio_project_id.is_not(None))
                              .order_by(LabelingExport.id.desc())).first()
        if pushed is None:
            raise AppError(409, f"Subset {spec.subset_id} was never sent to Label Studio; send it first "
                                "(Send to Label Studio), or import an exported file with Import labels.")
        client = client_for(session)
        project_id = pushed.label_studio_project_id
    _progress(ctx, 0, 2, f"fetching the annotations of Label Studio project {project_id}")
    with client:
        content = client.export_annotations(project_id)
    _progress(ctx, 1, 2, "importing the labels")
    with session_scope() as session:
        spec = session.get(LabelJob, job_id)
        pool = session.get(Pool, spec.pool_id)
        parsed = parse_labels(f"label-studio-project-{project_id}.json", content)
        outcome = service.import_labels(session, pool, parsed, f"Label Studio project {project_id}",
                                        spec.token_name)
        result = {"project_id": project_id, "report": outcome.report,
                  "label_set_id": outcome.label_set.id if outcome.label_set else None}
        message = (f"imported {outcome.label_set.label_count} labels (label set {outcome.label_set.id})"
                   if outcome.label_set else "no answer changed")
        status = _finish(ctx, session, result, message)
        if outcome.regrade_job_id is not None:  # committed with the labels, sent after
            commit_and_send(session, [outcome.regrade_job_id])
    return status


def _regrade(ctx: TaskContext) -> str:
    with session_scope() as session:
        spec = session.get(LabelJob, ctx.job_id)
        pool = session.get(Pool, spec.pool_id)

        def progress(done: int, total: int) -> bool:
            # In this session, committed each batch: re-grading against the answers of the moment can be
            # repeated safely, and on SQLite a second connection could not write past our open transaction.
            going_on = ctx.beat(done=done, total=total, message=f"re-graded {done} of {total} samples",
                                stopped=f"after {done} of {total} samples", session=session)
            session.commit()
            # The pool row, locked for the next batch: an import waits for it, so no batch grades against
            # answers an import is replacing.
            if going_on:
                regrade.lock_pool(session, pool.id)
            return going_on

        regrade.lock_pool(session, pool.id)
        if not regrade.regrade_pool(session, pool, spec.prompt_ids or [], progress=progress):
            return "stopped"
        return _finish(ctx, session, {"prompts": len(spec.prompt_ids or [])},
                       f"re-graded {len(spec.prompt_ids or [])} prompts' samples")
