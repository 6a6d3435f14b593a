"""Creating training runs: validate, then write the job and the run. The caller commits, then enqueues."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from backend.database import get_or_404
from backend.errors import AppError
from backend.jobs.service import create_job
from backend.jobs.tables import Job
from backend.models_catalog import check_model
from backend.pools.tables import Pool
from backend.runs.settings import TrainingSettings, parse_training_settings
from backend.runs.tables import Run
from backend.subsets.tables import Subset

TRAIN_JOB_KIND = "train"


def create_run(session: Session, subset_id: int, settings: dict[str, Any] | TrainingSettings) -> Run:
    """A queued ``train`` job and its run. 404: no such subset; 409: the subset's pool has no answers
    (the reward needs them); 422: settings break a rule (said in words) or the model is unknown."""
    subset = get_or_404(session, Subset, subset_id)
    pool = session.get(Pool, subset.pool_id)
    if pool is None or not pool.has_answers:
        raise AppError(409, f"Subset {subset_id} comes from a pool without answers; GRPO's reward grades "
                            "completions against gold answers. Upload the pool again with an answer column "
                            "(or label the chosen prompts), probe it, and freeze a subset from that probe.")
    parsed, problems = parse_training_settings(settings)
    if parsed is None:
        raise AppError(422, "Training settings rejected: " + " ".join(problems), details={"problems": problems})
    check_model(parsed.model)
    if parsed.eval_pool_id is not None:
        eval_pool = get_or_404(session, Pool, parsed.eval_pool_id)
        if not eval_pool.has_answers:
            raise AppError(422, f"Evaluation pool {eval_pool.id} has no answers; accuracy needs gold answers.")
    job = create_job(session, TRAIN_JOB_KIND, total=parsed.max_steps)
    run = Run(subset_id=subset.id, job_id=job.id, model=parsed.model, settings=parsed.model_dump(mode="json"),
              seed=parsed.seed, eval_pool_id=parsed.eval_pool_id)
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, run_id: int) -> Run:
    return get_or_404(session, Run, run_id)


def run_job(session: Session, run: Run) -> Job:
    return session.get(Job, run.job_id)
