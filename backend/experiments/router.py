"""Experiments API: one action launches a run per strategy at the same budget; compare their curves."""

from fastapi import APIRouter

from backend.database import SessionDep
from backend.experiments import service
from backend.experiments.schemas import Comparison, ExperimentCreate, ExperimentRead
from backend.runs.launch import launch
from backend.runs.service import fail_lost_runs

router = APIRouter(tags=["experiments"])


@router.post("/experiments", status_code=201)
def create_experiment(body: ExperimentCreate, session: SessionDep) -> ExperimentRead:
    experiment, created = service.create_experiment(session, body)
    launch(session, created)
    return service.experiment_read(session, experiment)


@router.get("/experiments")
def list_experiments(session: SessionDep, probe_id: int | None = None) -> list[ExperimentRead]:
    fail_lost_runs(session)
    return [service.experiment_read(session, e) for e in service.list_experiments(session, probe_id)]


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: int, session: SessionDep) -> ExperimentRead:
    fail_lost_runs(session)
    return service.experiment_read(session, service.get_experiment(session, experiment_id))


@router.post("/experiments/{experiment_id}/cancel")
def cancel_experiment(experiment_id: int, session: SessionDep) -> ExperimentRead:
    experiment = service.get_experiment(session, experiment_id)
    service.cancel_experiment(session, experiment)
    return service.experiment_read(session, experiment)


@router.get("/experiments/{experiment_id}/compare")
def compare_experiment(experiment_id: int, session: SessionDep) -> Comparison:
    fail_lost_runs(session)
    return service.compare(session, service.get_experiment(session, experiment_id))
