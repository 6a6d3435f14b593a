"""The labeling job kinds (push to Label Studio, pull labels back, re-grade), on the cpu queue, run by
backend.labels.jobs.run: no model is loaded."""

from sqlmodel import Session

from backend.jobs.kinds import JobKind, register
from backend.jobs.sizing import limits_for_tokens
from backend.jobs.tables import Job
from backend.labels.tables import LabelJob


def _time_limits(session: Session, job: Job, args: dict) -> tuple[float, float]:
    return limits_for_tokens(0)  # network and database work: the floor


def _exists(session: Session, job: Job) -> bool:
    return session.get(LabelJob, job.id) is not None


JOB_KINDS = {"push": "label_push", "pull": "label_pull", "regrade": "regrade"}  # action: Job.kind
TITLES = {"push": "Sending to Label Studio", "pull": "Pulling labels", "regrade": "Re-grading"}


# A push creates a Label Studio project, so a lost or failed push is not run again (it would create a second
# one); a pull and a re-grade write the same result when repeated.
LABEL_KINDS = {action: register(JobKind(
    name=name, title=TITLES[action], task_name=f"budgetlab.{name}", queue="cpu", run="backend.labels.jobs:run",
    time_limits=_time_limits, rerun_when_lost=action != "push", retry_transient=action != "push",
    inputs_exist=_exists)) for action, name in JOB_KINDS.items()}
