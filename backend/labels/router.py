"""Labeling API: export for labeling, import labels (label sets, undo), Label Studio hand-off, trust."""

from typing import Annotated

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import Response

from backend.auth.dependencies import CurrentPrincipal
from backend.database import SessionDep, WritingSessionDep, get_or_404
from backend.errors import AppError
from backend.jobs.dispatch import commit_and_send
from backend.jobs.schemas import JobRead
from backend.labels import connection, formats, service
from backend.labels import probe_trust as trust
from backend.labels.export import MEDIA, export_file
from backend.labels.formats import LabelingRow
from backend.labels.labeling_rows import prompt_rows, subset_rows
from backend.labels.schemas import (
    FileFormat,
    LabelImportRead,
    LabelingSettings,
    LabelSetRead,
    LabelStudioRead,
    LabelStudioSave,
    PoolLabelsRead,
    SelectionExport,
    TrustRead,
)
from backend.labels.tables import LabelSet
from backend.params import INT32_MAX, PathId
from backend.pools.tables import Pool
from backend.probes.service import get_probe
from backend.probes.tables import Probe
from backend.subsets.service import compute_selection, get_subset
from backend.subsets.tables import Subset

router = APIRouter(tags=["labels"])
PoolId = PathId(Pool, "Pool")
SubsetId = PathId(Subset, "Subset")
LabelSetId = PathId(LabelSet, "Label set")
_FILE = {200: {"content": {media: {} for media in MEDIA.values()}, "description": "The file to label"}}


def _file(pool: Pool, rows: list[LabelingRow], format: str, stem: str) -> Response:
    body, filename = export_file(pool.task_type, pool.id, rows, format, stem)
    disposition = f'attachment; filename="{filename}"'
    return Response(body, media_type=MEDIA[format], headers={"Content-Disposition": disposition})


def _import_read(outcome: service.ImportOutcome) -> LabelImportRead:
    label_set = outcome.label_set and LabelSetRead.model_validate(outcome.label_set, from_attributes=True)
    return LabelImportRead(report=outcome.report, label_set=label_set)


def _record(session, pool: Pool, subset_id: int | None, format: str, count: int, token) -> None:
    if format != "label-studio-config":  # the config goes with the tasks; it sends no prompt
        service.record_export(session, pool.id, subset_id, format, count, token.name)


@router.get("/subsets/{subset_id}/labeling-export", response_class=Response, responses=_FILE)
def export_subset_for_labeling(subset_id: SubsetId, session: WritingSessionDep, token: CurrentPrincipal,
                               format: FileFormat = "label-studio") -> Response:
    """The subset's prompts for annotators, in rank order; recorded as sent for labeling."""
    subset = get_subset(session, subset_id)
    pool = get_or_404(session, Pool, subset.pool_id)
    rows = subset_rows(session, subset)
    response = _file(pool, rows, format, f"subset-{subset.id}")
    _record(session, pool, subset.id, format, len(rows), token)  # committed with the request, once built
    return response


@router.post("/selections/labeling-export", response_class=Response,
             responses={**_FILE, 404: {"description": "The probe does not exist"},
                        409: {"description": "The probe has not finished"}})
def export_selection_for_labeling(body: SelectionExport, session: SessionDep, token: CurrentPrincipal) -> Response:
    """The prompts a planner preview picks, without freezing a subset first."""
    selection = compute_selection(session, body)
    pool = get_or_404(session, Pool, selection.probe.pool_id)
    rows = prompt_rows(session, [int(i) for i in selection.scores.prompt_ids[selection.picked]])
    response = _file(pool, rows, body.format, f"probe-{selection.probe.id}-{body.strategy}")
    _record(session, pool, None, body.format, len(rows), token)
    return response


@router.post("/pools/{pool_id}/labels", responses={422: {"description": "The file cannot be used; nothing changed"},
                                                   409: {"description": "A probe of the pool is running"}})
def import_labels(pool_id: PoolId, session: SessionDep, token: CurrentPrincipal,
                  file: Annotated[UploadFile, File(description="A Label Studio JSON export, an Argilla export, "
                                                               "or CSV/JSONL with id and answer")],
                  dry_run: Annotated[bool, Form(description="Report what would change; change nothing")] = False,
                  ) -> LabelImportRead:
    pool = get_or_404(session, Pool, pool_id)
    name = file.filename or "labels"
    try:
        parsed = formats.parse_labels(name, file.file.read())
    except formats.LabelFileError as exc:
        raise AppError(422, f"{name}: {exc} Nothing was imported.") from exc
    outcome = service.import_labels(session, pool, parsed, name, token.name, dry_run=dry_run)
    read = _import_read(outcome)
    commit_and_send(session, [outcome.regrade_job_id] if outcome.regrade_job_id else [])
    return read


@router.get("/pools/{pool_id}/labels")
def pool_labels(pool_id: PoolId, session: SessionDep) -> PoolLabelsRead:
    return PoolLabelsRead.model_validate(service.pool_labels(session, get_or_404(session, Pool, pool_id)),
                                         from_attributes=True)


@router.put("/pools/{pool_id}/labeling")
def set_labeling(pool_id: PoolId, body: LabelingSettings, session: SessionDep) -> PoolLabelsRead:
    """Set what one label costs, so the pool shows the money spent."""
    pool = get_or_404(session, Pool, pool_id)
    pool.cost_per_label = body.cost_per_label
    session.add(pool)
    session.flush()
    return pool_labels(pool_id, session)


@router.get("/label-sets/{label_set_id}")
def get_label_set(label_set_id: LabelSetId, session: SessionDep) -> LabelSetRead:
    return LabelSetRead.model_validate(service.get_label_set(session, label_set_id), from_attributes=True)


@router.post("/label-sets/{label_set_id}/undo", responses={409: {"description": "Already undone, or probing"}})
def undo_label_set(label_set_id: LabelSetId, session: SessionDep,
                   token: CurrentPrincipal) -> LabelImportRead:
    """Put back the answers this import replaced (history is kept; a later import's answers stay)."""
    label_set = service.get_label_set(session, label_set_id)
    outcome = service.undo(session, label_set, token.name)
    read = _import_read(outcome)
    commit_and_send(session, [outcome.regrade_job_id] if outcome.regrade_job_id else [])
    return read


@router.post("/pools/{pool_id}/regrade", responses={409: {"description": "A probe of the pool is running"}})
def regrade_pool(pool_id: PoolId, session: SessionDep, token: CurrentPrincipal) -> LabelImportRead:
    """Re-grade every stored sample of the pool's probes against its answers now (after a re-grading job
    failed or could not be queued): inline when small, else a job (`report.regrade_job_id`)."""
    outcome = service.regrade_all(session, get_or_404(session, Pool, pool_id), token.name)
    read = _import_read(outcome)
    commit_and_send(session, [outcome.regrade_job_id] if outcome.regrade_job_id else [])
    return read


@router.get("/probes/{probe_id}/trust", responses={409: {"description": "Too few labeled prompts to compare"}})
def probe_trust(probe_id: PathId(Probe, "Probe"), session: SessionDep,
                n: Annotated[int | None, Query(ge=1, le=INT32_MAX, description="Budget in prompts")] = None,
                fraction: Annotated[float, Query(gt=0, le=1, description="Budget as a share, when n is not given")]
                = 0.1) -> TrustRead:
    """How far label-free difficulty (agreement) ranks prompts like pass rate does, measured on labeled
    prompts of this probe or, when it has too few, of a finished probe with the same model and settings."""
    probe = get_probe(session, probe_id)
    return TrustRead(**trust.probe_trust(session, probe, n, fraction))


@router.get("/label-studio")
def get_label_studio(session: SessionDep) -> LabelStudioRead:
    """The configured Label Studio server (its API key is never returned)."""
    return LabelStudioRead(**connection.connection_read(connection.get_connection(session)))


@router.put("/label-studio", responses={422: {"description": "The server refused the key or cannot be reached"}})
def save_label_studio(body: LabelStudioSave, session: SessionDep, token: CurrentPrincipal) -> LabelStudioRead:
    """Check the server and key, then keep them on the server."""
    saved = connection.save_connection(session, body.url, body.api_key, token.name)
    return LabelStudioRead(**connection.connection_read(saved))


@router.delete("/label-studio", status_code=204)
def forget_label_studio(session: SessionDep) -> None:
    connection.delete_connection(session)


def _label_job(session, subset_id: int, action: str, token) -> JobRead:
    subset = get_subset(session, subset_id)
    connection.client_for(session)  # 409 now, rather than a failed job, when none is configured
    job = service.create_label_job(session, action, subset.pool_id, subset.id, token.name, total=subset.n)
    commit_and_send(session, [job.id])
    session.refresh(job)
    return JobRead.of(job)


@router.post("/subsets/{subset_id}/label-studio/push", status_code=202,
             responses={409: {"description": "No Label Studio server is configured"}})
def push_to_label_studio(subset_id: SubsetId, session: SessionDep, token: CurrentPrincipal) -> JobRead:
    """Create a Label Studio project with the fitting config and import the subset's prompts (a job)."""
    return _label_job(session, subset_id, "push", token)


@router.post("/subsets/{subset_id}/label-studio/pull", status_code=202,
             responses={409: {"description": "No Label Studio server is configured"}})
def pull_from_label_studio(subset_id: SubsetId, session: SessionDep, token: CurrentPrincipal) -> JobRead:
    """Fetch the finished annotations of the subset's latest project and import them as a label set (a job)."""
    return _label_job(session, subset_id, "pull", token)
