"""The training job kind: one task per run, on the gpu queue, by worker.training.run_training."""

from sqlalchemy import func
from sqlmodel import Session, select

from backend.jobs.kinds import JobKind, register
from backend.jobs.sizing import limits_for_tokens
from backend.jobs.tables import Job
from backend.runs.settings import TrainingSettings
from backend.runs.tables import Run, RunMetric

BACKWARD_COST = 3  # a training token costs about its generation plus a forward and a backward pass


def describe_lost_run(session: Session, job: Job) -> str:
    run = session.exec(select(Run).where(Run.job_id == job.id)).first()
    step = (session.exec(select(func.max(RunMetric.step)).where(RunMetric.run_id == run.id)).one() or 0) if run else 0
    return (f"The worker training this run was lost after step {step} of {job.progress_total} (its process was "
            "killed, hung, ran out of host memory, or its machine restarted). The metrics it logged are kept; launch a "
            "new run with the same settings to train to the end.")


def _time_limits(session: Session, job: Job, args: dict) -> tuple[float, float]:
    s = TrainingSettings(**session.get(Run, args["run_id"]).settings)
    training = s.max_steps * s.batch_size * s.max_completion_length * BACKWARD_COST
    evaluations = (s.max_steps // s.eval_every if s.eval_every else 0) + 2
    evaluation = (evaluations * s.eval_samples if s.eval_pool_id else 0) * s.max_completion_length
    ood_tokens = s.ood_max_new_tokens or s.max_completion_length
    ood = 2 * len(s.ood_pool_ids) * s.ood_samples * s.ood_k * ood_tokens  # before and after
    return limits_for_tokens(training + evaluation + ood)


TRAIN = register(JobKind(
    name="train", title="Training", task_name="budgetlab.train_run", queue="gpu",
    run="worker.training:run_training", prepare="worker.training:prepare_training", time_limits=_time_limits,
    rerun_when_lost=False,  # no checkpoint to resume from: the run fails as lost, its logged metrics kept
    describe_lost=describe_lost_run,
    inputs_exist=lambda session, job: session.exec(select(Run.id).where(Run.job_id == job.id)).first() is not None))
