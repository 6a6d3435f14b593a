"""The probe job kind: one task per shard, run on the gpu queue by worker.probing.run_shard."""

from sqlmodel import Session, select

from backend.jobs.kinds import JobKind, register
from backend.jobs.sizing import limits_for_tokens
from backend.jobs.tables import Job
from backend.probes.tables import Probe, ProbeShard


def _probe(session: Session, job: Job) -> Probe | None:
    return session.exec(select(Probe).where(Probe.job_id == job.id)).first()


def _time_limits(session: Session, job: Job, args: dict) -> tuple[float, float]:
    probe = session.get(Probe, args["probe_id"])
    shard = session.get(ProbeShard, (args["probe_id"], args["shard_index"]))
    return limits_for_tokens(shard.size * probe.k * probe.max_new_tokens)


def _k(session: Session, job: Job) -> int | None:
    """Samples per unit of progress: k per prompt, or 1 for an adaptive probe (whose progress is in samples)."""
    probe = _probe(session, job)
    return (1 if probe.adaptive is not None else probe.k) if probe else None


PROBE = register(JobKind(
    name="probe", title="Probing", task_name="budgetlab.probe_shard", queue="gpu", run="worker.probing:run_shard",
    prepare="worker.probing:load_engine",
    time_limits=_time_limits, rerun_when_lost=True,  # a shard's results commit all at once: safe to run again
    inputs_exist=lambda session, job: _probe(session, job) is not None, retry_gpu_out_of_memory=True,
    samples_per_unit=_k))
