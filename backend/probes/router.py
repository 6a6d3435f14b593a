from typing import Annotated, Any

from fastapi import APIRouter, Query

from backend.charts import difficulty_histogram
from backend.curation.histogram import histogram, summary
from backend.database import SessionDep
from backend.jobs.dispatch import commit_and_send
from backend.params import Limit, Offset, PathId, QueryId
from backend.pools.tables import Pool, Prompt
from backend.probes import service
from backend.probes.schemas import (
    PROBE_PRESETS,
    DifficultyRead,
    FailureBreakdown,
    ProbeCreate,
    ProbeRead,
    PromptSamples,
)
from backend.probes.score_arrays import load_scores
from backend.probes.tables import Probe
from backend.settings import get_settings

router = APIRouter(tags=["probes"])
ProbeId = PathId(Probe, "Probe")


@router.post("/probes", status_code=202,
             responses={404: {"description": "The pool does not exist"},
                        409: {"description": "The pool has no prompts"}})
def create_probe(body: ProbeCreate, session: SessionDep) -> ProbeRead:
    """The probe and its shards' tasks are committed together; the tasks are sent after the commit (a broker
    that is down delays them, the job's message says so, and the reconciler sends them when it is back)."""
    probe = service.create_probe(session, body, get_settings().probe_shard_size)
    commit_and_send(session, [probe.job_id])
    return service.probe_read(session, probe)


@router.get("/probes")
def list_probes(session: SessionDep,
                pool_id: QueryId(Pool, "Pool", "Only the probes of this pool") = None,
                limit: Limit = 100, offset: Offset = 0) -> list[ProbeRead]:
    return [service.probe_read(session, p) for p in service.list_probes(session, pool_id, limit=limit, offset=offset)]


@router.get("/probes/presets")
def probe_presets() -> dict[str, dict[str, Any]]:
    """The probe presets by name: the fields each sets (fields sent with a preset override it)."""
    return PROBE_PRESETS


@router.get("/probes/{probe_id}")
def get_probe(probe_id: ProbeId, session: SessionDep) -> ProbeRead:
    return service.probe_read(session, service.get_probe(session, probe_id))


@router.get("/probes/{probe_id}/difficulty", responses={409: {"description": "The probe failed or was cancelled"}})
def probe_difficulty(probe_id: ProbeId, session: SessionDep,
                     bins: Annotated[int, Query(ge=1, le=200)] = 20) -> DifficultyRead:
    """The difficulty histogram; while the probe runs, of the prompts whose shards have finished (partial)."""
    probe = service.get_probe(session, probe_id)
    finished = service.require_scores(session, probe)
    scores = load_scores(session, probe, finished=finished)
    metric = "agreement" if probe.label_free else "pass_rate"
    success = 1.0 - scores.difficulty  # pass rate with gold answers, agreement without
    counts = histogram(success, bins)
    return DifficultyRead(probe_id=probe.id, label_free=probe.label_free, metric=metric, histogram=counts,
                          partial=not finished, prompt_count=probe.prompt_count,
                          summary=summary(success),
                          figure=difficulty_histogram(counts["edges"], counts["counts"], metric))


@router.get("/probes/{probe_id}/failures",
            responses={409: {"description": "The probe has not finished, or is label-free"}})
def probe_failures(probe_id: ProbeId, session: SessionDep) -> FailureBreakdown:
    """Why the never-solved prompts fail: likely label errors (the k samples agree on another answer than the
    gold), no readable answer (none given, or cut off at max_new_tokens), or wrong and scattered answers."""
    return FailureBreakdown(**service.failures(session, service.get_probe(session, probe_id)))


@router.get("/probes/{probe_id}/prompts/{prompt_id}/samples")
def prompt_samples(probe_id: ProbeId, prompt_id: PathId(Prompt, "Prompt"), session: SessionDep) -> PromptSamples:
    return service.prompt_samples(session, service.get_probe(session, probe_id), prompt_id)
