"""Experiments API: one action launches a run per strategy at the same budget; compare their curves."""

from fastapi import APIRouter
from pydantic import BaseModel

from backend.database import SessionDep
from backend.errors import AppError
from backend.experiments import service
from backend.experiments.schemas import Capacity, Comparison, ExperimentCreate, ExperimentRead
from backend.experiments.tables import Experiment
from backend.jobs.dispatch import commit_and_send
from backend.params import BodyId, Limit, Offset, PathId, QueryId
from backend.probes.tables import Probe
from backend.runs.reprobe import capacity, probe_jobs, reprobe
from backend.runs.service import list_runs, run_job
from backend.settings import get_settings

router = APIRouter(tags=["experiments"])
ExperimentId = PathId(Experiment, "Experiment")


@router.post("/experiments", status_code=201,
             responses={404: {"description": "The probe or an evaluation pool does not exist"},
                        409: {"description": "The probe has not finished, or its pool cannot be trained on"},
                        503: {"description": "The task broker cannot be reached"}})
def create_experiment(body: ExperimentCreate, session: SessionDep) -> ExperimentRead:
    experiment, created = service.create_experiment(session, body)
    commit_and_send(session, [run.job_id for run in created])
    return service.experiment_read(session, experiment)


class DemoExperimentCreate(BaseModel):
    probe_id: BodyId(Probe, "Probe")


@router.post("/experiments/demo", status_code=201,
             responses={404: {"description": "The probe does not exist"},
                        409: {"description": "The probe has not finished"},
                        422: {"description": "The probe is not of the demo pool"}})
def create_demo_experiment(body: DemoExperimentCreate, session: SessionDep) -> ExperimentRead:
    """The demo experiment on a probe of the demo pool: hard, easy, random and learnable at the same N, trained with
    the demo_cpu preset and evaluated on the held-out demo pool (created if missing)."""
    experiment, created = service.create_demo_experiment(session, body.probe_id)
    commit_and_send(session, [run.job_id for run in created])
    return service.experiment_read(session, experiment)


@router.get("/experiments")
def list_experiments(session: SessionDep,
                     probe_id: QueryId(Probe, "Probe", "Only the experiments on this probe") = None,
                     limit: Limit = 100, offset: Offset = 0) -> list[ExperimentRead]:
    return [service.experiment_read(session, e)
            for e in service.list_experiments(session, probe_id, limit=limit, offset=offset)]


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: ExperimentId, session: SessionDep) -> ExperimentRead:
    return service.experiment_read(session, service.get_experiment(session, experiment_id))


@router.post("/experiments/{experiment_id}/cancel")
def cancel_experiment(experiment_id: ExperimentId, session: SessionDep) -> ExperimentRead:
    experiment = service.get_experiment(session, experiment_id)
    service.cancel_experiment(session, experiment)
    return service.experiment_read(session, experiment)


@router.get("/experiments/{experiment_id}/compare")
def compare_experiment(experiment_id: ExperimentId, session: SessionDep) -> Comparison:
    return service.compare(session, service.get_experiment(session, experiment_id))


@router.post("/experiments/{experiment_id}/reprobe", status_code=202,
             responses={409: {"description": "No run of the experiment has trained to the end"}})
def reprobe_experiment(experiment_id: ExperimentId, session: SessionDep) -> Capacity:
    """Re-probe every run that trained to the end with its adapter (POST /runs/{id}/reprobe for each; runs on the
    same evaluation pool share its base-model probe), for the capacity boundary."""
    experiment = service.get_experiment(session, experiment_id)
    runs = [run for run in list_runs(session, experiment_id=experiment.id)
            if run_job(session, run).status == "succeeded"]
    if not runs:
        raise AppError(409, f"No run of experiment {experiment.id} has trained to the end yet; re-probe once one has.")
    jobs: set[int] = set()
    refused = []
    for run in runs:
        try:
            links = reprobe(session, run, get_settings().probe_shard_size)
        except AppError as exc:  # e.g. one run's adapter is gone: the others are re-probed all the same
            refused.append(exc)
            continue
        jobs.update(probe_jobs(session, links))
    if len(refused) == len(runs):
        raise refused[0]
    commit_and_send(session, sorted(jobs))
    return Capacity(**capacity(session, runs))


@router.get("/experiments/{experiment_id}/capacity")
def experiment_capacity(experiment_id: ExperimentId, session: SessionDep) -> Capacity:
    """Per strategy, the gain in pass rate on the evaluation pool by the base model's tier (never, rarely, often,
    always solved), from the runs' re-probes (POST /experiments/{id}/reprobe): the capacity boundary."""
    experiment = service.get_experiment(session, experiment_id)
    return Capacity(**capacity(session, list_runs(session, experiment_id=experiment.id)))
