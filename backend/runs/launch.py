"""Sending committed runs to the workers: ids only, after the commit, and never a run left queued for ever."""

from sqlmodel import Session

from backend.errors import AppError
from backend.jobs.service import fail_unless_finished
from backend.runs.tables import Run


def launch(session: Session, runs: list[Run]) -> None:
    """Commit the runs, then send one task per run. A broker failure fails their jobs and raises 503."""
    from worker.celery_app import enqueue
    from worker.training_task import TRAIN_TASK

    session.commit()
    try:
        for run in runs:
            enqueue(TRAIN_TASK, run.id)
    except Exception as exc:
        message = (f"Could not queue the training run: the task broker is unreachable ({exc}). Start it (or check "
                   "CELERY_BROKER_URL) and launch the run again.")
        for run in runs:
            fail_unless_finished(session, run.job_id, message)
        session.commit()
        raise AppError(503, message) from exc
