"""Runs API: launch a GRPO run on a frozen subset, read it with its job, metrics, figures and downloads.
Cancelling goes through POST /jobs/{job_id}/cancel like every job."""

import os
from pathlib import Path

from fastapi import APIRouter, BackgroundTasks
from fastapi.responses import FileResponse, Response

from backend.database import SessionDep
from backend.errors import AppError
from backend.experiments.tables import Experiment
from backend.jobs.dispatch import commit_and_send
from backend.params import Limit, Offset, PathId, QueryId
from backend.runs import service
from backend.runs.downloads import adapter_zip, metrics_csv, trl_config
from backend.runs.figures import FIGURE_KEYS, run_figures
from backend.runs.reprobe import moved, probe_jobs, reprobe
from backend.runs.schemas import RunCreate, RunMetrics, RunMoved, RunRead
from backend.runs.settings import PRESETS, TrainingSettings, preset
from backend.runs.tables import Run
from backend.settings import get_settings
from backend.subsets.tables import Subset

router = APIRouter(tags=["runs"])
RunId = PathId(Run, "Run")


@router.get("/training/presets")
def training_presets() -> dict:
    return {"presets": {name: preset(name).model_dump(mode="json") for name in PRESETS},
            "defaults": TrainingSettings().model_dump(mode="json")}


@router.post("/runs", status_code=201,
             responses={404: {"description": "The subset or an evaluation pool does not exist"},
                        409: {"description": "The subset's pool cannot be trained on"},
                        503: {"description": "The task broker cannot be reached"}})
def create_run(body: RunCreate, session: SessionDep) -> RunRead:
    run = service.create_run(session, body.subset_id, body.settings, preset=body.preset,
                             allow_other_model=body.allow_other_model)
    commit_and_send(session, [run.job_id])
    return RunRead.of(session, run)


@router.get("/runs")
def list_runs(session: SessionDep, experiment_id: QueryId(Experiment, "Experiment") = None,
              subset_id: QueryId(Subset, "Subset") = None, limit: Limit = 100, offset: Offset = 0) -> list[RunRead]:
    return [RunRead.of(session, run) for run in service.list_runs(session, experiment_id=experiment_id,
                                                                  subset_id=subset_id, limit=limit, offset=offset)]


@router.get("/runs/{run_id}")
def get_run(run_id: RunId, session: SessionDep) -> RunRead:
    return RunRead.of(session, service.get_run(session, run_id))


@router.post("/runs/{run_id}/reprobe", status_code=202,
             responses={409: {"description": "The run has not trained to the end, or its probe is label-free"}})
def reprobe_run(run_id: RunId, session: SessionDep) -> RunMoved:
    """Probe the run's trained policy (base model + its LoRA adapter) on its subset and its evaluation pool, with
    the settings of the probe its subset came from (and the base model on the evaluation pool where it has no such
    probe yet). Asking again returns the same probes unless one failed or was cancelled."""
    links = reprobe(session, service.get_run(session, run_id), get_settings().probe_shard_size)
    commit_and_send(session, probe_jobs(session, links))
    return RunMoved(run_id=run_id, scopes=moved(session, run_id))


@router.get("/runs/{run_id}/moved")
def run_moved(run_id: RunId, session: SessionDep) -> RunMoved:
    """Which prompts moved between the base model and the trained policy: a transition table by tier, the pass rate
    by the base tier, and the prompts never solved before that the policy now solves."""
    service.get_run(session, run_id)
    return RunMoved(run_id=run_id, scopes=moved(session, run_id))


@router.get("/runs/{run_id}/metrics")
def run_metrics(run_id: RunId, session: SessionDep, keys: str | None = None) -> RunMetrics:
    service.get_run(session, run_id)
    wanted = [key.strip() for key in keys.split(",") if key.strip()] if keys else None
    return RunMetrics(run_id=run_id, keys=service.metric_keys(session, run_id),
                      series=service.metric_series(session, run_id, wanted))


@router.get("/runs/{run_id}/figures")
def run_figures_(run_id: RunId, session: SessionDep) -> dict:
    run = service.get_run(session, run_id)
    return {"figures": run_figures(service.metric_series(session, run_id, FIGURE_KEYS), run.settings)}


@router.get("/runs/{run_id}/metrics.csv", response_class=Response,
            responses={200: {"content": {"text/csv": {}}, "description": "Every logged metric, one row per step"}})
def run_metrics_csv(run_id: RunId, session: SessionDep) -> Response:
    service.get_run(session, run_id)
    return Response(metrics_csv(service.metric_series(session, run_id)), media_type="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="run-{run_id}-metrics.csv"'})


@router.get("/runs/{run_id}/config", response_class=Response,
            responses={200: {"content": {"application/json": {}}, "description": "The TRL GRPOConfig as JSON"}})
def run_config(run_id: RunId, session: SessionDep) -> Response:
    import json

    config = trl_config(service.get_run(session, run_id))
    return Response(json.dumps(config, indent=2), media_type="application/json",
                    headers={"Content-Disposition": f'attachment; filename="run-{run_id}-trl-config.json"'})


@router.get("/runs/{run_id}/adapter", response_class=FileResponse,
            responses={200: {"content": {"application/zip": {}}, "description": "The LoRA adapter as a zip"},
                       409: {"description": "The run has no adapter yet"},
                       410: {"description": "The adapter was deleted from the artifact store"}})
def run_adapter(run_id: RunId, session: SessionDep, background: BackgroundTasks) -> FileResponse:
    run = service.get_run(session, run_id)
    job = service.run_job(session, run)
    if run.adapter_path is None:
        raise AppError(409, f"Run {run_id} has no adapter yet (its job is {job.status}); the LoRA adapter is saved "
                            "when training succeeds.")
    adapter = Path(run.adapter_path)
    if not adapter.is_dir():
        raise AppError(410, f"Run {run_id}'s adapter is missing from the artifact store ({adapter}); it was deleted "
                            "or the store moved. Train the run again to get a new one.")
    path = adapter_zip(adapter)
    background.add_task(os.remove, path)
    return FileResponse(path, media_type="application/zip",
                        headers={"Content-Disposition": f'attachment; filename="run-{run_id}-adapter.zip"'})
