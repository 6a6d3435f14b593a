"""Labeling jobs, run by a worker from ids: push a subset to Label Studio, pull its labels back, and
re-grade a pool's samples after a large import. Each reports progress on its job row."""

import logging

from sqlmodel import Session, select

from backend.database import session_scope
from backend.errors import AppError
from backend.jobs.service import fail_unless_finished, lock_job, transition
from backend.jobs.tables import FINISHED, JobStatus
from backend.labels import regrade, service
from backend.labels.connection import client_for
from backend.labels.formats import LabelFileError, label_studio_config, label_studio_tasks, parse_labels
from backend.labels.label_studio import LabelStudioError
from backend.labels.labeling_rows import subset_rows
from backend.labels.tables import LabelingExport, LabelJob
from backend.pools.tables import Pool
from backend.subsets.tables import Subset

log = logging.getLogger(__name__)

LABEL_JOB_TASK = "budgetlab.label_job"


def send(session: Session, job_ids: list[int], regrade_pool_id: int | None = None) -> None:
    """Commit, then send each job's task (ids only). A broker failure fails the jobs and raises 503
    (saying, for a re-grade of `regrade_pool_id`, that the labels were saved and how to re-grade)."""
    from worker.celery_app import enqueue

    session.commit()
    try:
        for job_id in job_ids:
            enqueue(LABEL_JOB_TASK, job_id)
    except Exception as exc:
        message = (f"Could not queue the labeling job: the task broker is unreachable ({exc}). Start it (or check "
                   "CELERY_BROKER_URL) and try again.")
        if regrade_pool_id is not None:  # the answers are in; only their scores wait
            message = (f"The labels were saved, but re-grading the stored samples could not be queued: the task "
                       f"broker is unreachable ({exc}). Once it runs, re-grade with POST /api/pools/{regrade_pool_id}"
                       f"/regrade (budgetlab labels regrade {regrade_pool_id}).")
        for job_id in job_ids:
            fail_unless_finished(session, job_id, message)
        session.commit()
        raise AppError(503, message) from exc


def _progress(job_id: int, done: int, total: int, message: str) -> None:
    with session_scope() as session:
        job = lock_job(session, job_id)
        job.progress_done, job.progress_total, job.message = done, total, message[:1000]
        session.add(job)


def run_label_job(job_id: int) -> str:
    """Run one labeling job to its end: succeeded with a result, or failed with a message to act on."""
    with session_scope() as session:
        job = lock_job(session, job_id)
        if JobStatus(job.status) in FINISHED:
            return job.status
        if job.status == JobStatus.cancelling:
            transition(session, job, JobStatus.cancelled, "cancelled before it started")
            return "cancelled"
        if job.status == JobStatus.queued:
            transition(session, job, JobStatus.running, "a worker started it")
        spec = session.get(LabelJob, job_id)
        action, pool_id = spec.action, spec.pool_id
    # A failed re-grade leaves scores behind the answers; say how to bring them level.
    repair = (f" The labels are saved; re-grade with POST /api/pools/{pool_id}/regrade (budgetlab labels regrade "
              f"{pool_id}).") if action == "regrade" else ""
    try:
        result = {"push": _push, "pull": _pull, "regrade": _regrade}[action](job_id)
    except (LabelStudioError, LabelFileError, AppError) as exc:
        message = exc.message if isinstance(exc, AppError) else str(exc)
        with session_scope() as session:
            fail_unless_finished(session, job_id, message + repair)
        return "failed"
    except Exception as exc:
        log.exception("label job %s failed", job_id)
        with session_scope() as session:
            fail_unless_finished(session, job_id, f"The {action} job failed unexpectedly: {exc}.{repair}")
        raise
    return result


def _finish(session: Session, job_id: int, result: dict, message: str) -> str:
    spec = session.get(LabelJob, job_id)
    spec.result = result
    session.add(spec)
    job = lock_job(session, job_id)
    job.progress_done = job.progress_total
    job.message = message[:1000]
    if JobStatus(job.status) in FINISHED:
        return job.status
    transition(session, job, JobStatus.succeeded, message[:200])
    return "succeeded"


def _push(job_id: int) -> str:
    with session_scope() as session:
        spec = session.get(LabelJob, job_id)
        subset = session.get(Subset, spec.subset_id)
        pool = session.get(Pool, spec.pool_id)
        client = client_for(session)
        rows = subset_rows(session, subset)
        title = f"Budgetlab: {pool.name} / {subset.name}"[:50]
        task_type, pool_id, subset_id, token_name = pool.task_type, pool.id, subset.id, spec.token_name
    _progress(job_id, 0, len(rows), f"creating a Label Studio project for {len(rows)} prompts")
    with client:
        project_id = client.create_project(title, label_studio_config(task_type, [row.prompt for row in rows]))
        imported = client.import_tasks(project_id, label_studio_tasks(rows, pool_id), on_progress=lambda done, total: (
            _progress(job_id, done, total, f"imported {done} of {total} tasks into project {project_id}")))
    with session_scope() as session:
        service.record_export(session, pool_id, subset_id, "label-studio-project", imported, token_name,
                              label_studio_project_id=project_id, label_studio_url=client.project_url(project_id),
                              job_id=job_id)
        return _finish(session, job_id, {"project_id": project_id, "project_url": client.project_url(project_id),
                                         "tasks": imported},
                       f"sent {imported} prompts to Label Studio project {project_id}")


def _pull(job_id: int) -> str:
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
    _progress(job_id, 0, 2, f"fetching the annotations of Label Studio project {project_id}")
    with client:
        content = client.export_annotations(project_id)
    _progress(job_id, 1, 2, "importing the labels")
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
        status = _finish(session, job_id, result, message)
        regrade_job = outcome.regrade_job_id
    if regrade_job is not None:
        with session_scope() as session:
            send(session, [regrade_job], regrade_pool_id=spec.pool_id)
    return status


def _regrade(job_id: int) -> str:
    with session_scope() as session:
        spec = session.get(LabelJob, job_id)
        pool = session.get(Pool, spec.pool_id)

        def progress(done: int, total: int) -> bool:
            # Commits each batch: re-grading against the answers of the moment can be repeated safely,
            # and on SQLite a second connection could not write progress past our open transaction.
            job = lock_job(session, job_id)
            if job.status == JobStatus.cancelling:
                transition(session, job, JobStatus.cancelled, f"cancelled after {done} of {total} samples")
                session.commit()
                return False
            job.progress_done, job.progress_total = done, total
            job.message = f"re-graded {done} of {total} samples"
            session.add(job)
            session.commit()
            # The pool row, locked for the next batch: an import waits for it, so no batch grades against
            # answers an import is replacing.
            regrade.lock_pool(session, pool.id)
            return True

        regrade.lock_pool(session, pool.id)
        if not regrade.regrade_pool(session, pool, spec.prompt_ids or [], progress=progress):
            return "cancelled"
        return _finish(session, job_id, {"prompts": len(spec.prompt_ids or [])},
                       f"re-graded {len(spec.prompt_ids or [])} prompts' samples")
