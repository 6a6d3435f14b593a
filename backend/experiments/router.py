"""Experiments API: one action launches a run per strategy at the same budget; compare their curves."""

from fastapi import APIRouter
from pydantic import BaseModel

from backend.database import SessionDep
from backend.experiments import service
from backend.experiments.schemas import Comparison, ExperimentCreate, ExperimentRead
from backend.experiments.tables import Experiment
from backend.jobs.dispatch import commit_and_send
from backend.params import BodyId, PathId, QueryId
from backend.probes.tables import Probe

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
                     ) -> list[ExperimentRead]:
    return [service.experiment_read(session, e) for e in service.list_experiments(session, probe_id)]


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
