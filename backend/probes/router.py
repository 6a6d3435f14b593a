from typing import Annotated

from fastapi import APIRouter, Query

from backend.charts import difficulty_histogram
from backend.curation.histogram import histogram, summary
from backend.database import SessionDep
from backend.errors import AppError
from backend.jobs.service import get_job, transition
from backend.jobs.tables import JobStatus
from backend.params import PathId, QueryId
from backend.pools.tables import Pool, Prompt
from backend.probes import service
from backend.probes.schemas import DifficultyRead, ProbeCreate, ProbeRead, PromptSamples
from backend.probes.score_arrays import load_scores
from backend.probes.tables import Probe
from backend.settings import get_settings
from worker.celery_app import PROBE_SHARD_TASK, enqueue

router = APIRouter(tags=["probes"])
ProbeId = PathId(Probe, "Probe")


@router.post("/probes", status_code=202,
             responses={404: {"description": "The pool does not exist"},
                        409: {"description": "The pool has no prompts"},
                        503: {"description": "The task broker cannot be reached; the probe is marked failed"}})
def create_probe(body: ProbeCreate, session: SessionDep) -> ProbeRead:
    probe = service.create_probe(session, body, get_settings().probe_shard_size)
    session.commit()  # the ledger first: workers only ever receive ids of committed rows
    try:
        for shard_index in service.shard_indexes(session, probe.id):
            enqueue(PROBE_SHARD_TASK, probe.id, shard_index)
    except Exception as exc:  # broker unreachable: say so, and do not leave the job queued for ever
        transition(session, get_job(session, probe.job_id), JobStatus.failed, "could not enqueue",
                   error=f"The task broker could not be reached ({exc}); check CELERY_BROKER_URL and retry.")
        session.commit()
        raise AppError(503, "The task broker could not be reached; the probe was marked failed. "
                            "Check that the broker (CELERY_BROKER_URL) is running and start the probe again.") from exc
    return service.probe_read(session, probe)


@router.get("/probes")
def list_probes(session: SessionDep,
                pool_id: QueryId(Pool, "Pool", "Only the probes of this pool") = None) -> list[ProbeRead]:
    return [service.probe_read(session, p) for p in service.list_probes(session, pool_id)]


@router.get("/probes/{probe_id}")
def get_probe(probe_id: ProbeId, session: SessionDep) -> ProbeRead:
    return service.probe_read(session, service.get_probe(session, probe_id))


@router.get("/probes/{probe_id}/difficulty", responses={409: {"description": "The probe has not finished"}})
def probe_difficulty(probe_id: ProbeId, session: SessionDep,
                     bins: Annotated[int, Query(ge=1, le=200)] = 20) -> DifficultyRead:
    probe = service.get_probe(session, probe_id)
    service.require_finished(session, probe)
    scores = load_scores(session, probe)
    metric = "agreement" if probe.label_free else "pass_rate"
    success = 1.0 - scores.difficulty  # pass rate with gold answers, agreement without
    counts = histogram(success, bins)
    return DifficultyRead(probe_id=probe.id, label_free=probe.label_free, metric=metric, histogram=counts,
                          summary=summary(success),
                          figure=difficulty_histogram(counts["edges"], counts["counts"], metric))


@router.get("/probes/{probe_id}/prompts/{prompt_id}/samples")
def prompt_samples(probe_id: ProbeId, prompt_id: PathId(Prompt, "Prompt"), session: SessionDep) -> PromptSamples:
    return service.prompt_samples(session, service.get_probe(session, probe_id), prompt_id)
