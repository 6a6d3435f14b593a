import os
from typing import Literal

from fastapi import APIRouter, BackgroundTasks
from fastapi.responses import FileResponse, Response, StreamingResponse

from backend.database import SessionDep, session_scope
from backend.params import Limit, Offset, PathId, QueryId
from backend.probes.tables import Probe
from backend.subsets import export, service
from backend.subsets.schemas import SelectionPreview, SelectionRequest, SubsetCreate, SubsetRead
from backend.subsets.tables import Subset

router = APIRouter(tags=["selections"])
SubsetId = PathId(Subset, "Subset")
ExportFormat = Literal[tuple(export.FORMATS)]  # type: ignore[valid-type]
_PROBE_RESPONSES = {404: {"description": "The probe does not exist"},
                    409: {"description": "The probe has not finished"}}


@router.post("/selections/preview", responses=_PROBE_RESPONSES)
def preview_selection(body: SelectionRequest, session: SessionDep) -> SelectionPreview:
    return service.preview(session, body)


@router.post("/subsets", status_code=201, responses=_PROBE_RESPONSES)
def freeze_subset(body: SubsetCreate, session: SessionDep) -> SubsetRead:
    return service.subset_read(session, service.freeze(session, body))


@router.get("/subsets")
def list_subsets(session: SessionDep,
                 probe_id: QueryId(Probe, "Probe", "Only the subsets of this probe") = None,
                 limit: Limit = 100, offset: Offset = 0) -> list[SubsetRead]:
    return [service.subset_read(session, s)
            for s in service.list_subsets(session, probe_id, limit=limit, offset=offset)]


@router.get("/subsets/{subset_id}")
def get_subset(subset_id: SubsetId, session: SessionDep) -> SubsetRead:
    return service.subset_read(session, service.get_subset(session, subset_id))


@router.get("/subsets/{subset_id}/export", response_model=None, response_class=Response,
            responses={200: {"content": {media: {} for media in export.FORMATS.values()},
                             "description": "The subset's prompts, as a file"}})
def export_subset(subset_id: SubsetId, session: SessionDep, background: BackgroundTasks,
                  format: ExportFormat = "jsonl") -> StreamingResponse | FileResponse:
    subset = service.get_subset(session, subset_id)
    filename = f"subset-{subset.id}.{format}"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if format == "parquet":
        path = export.write_parquet(export.export_rows(session, subset))
        background.add_task(os.remove, path)
        return FileResponse(path, media_type=export.FORMATS[format], headers=headers)

    def chunks():
        # Streams after the handler returns, so it reads through a session of its own (deferred: a slow client
        # must not hold SQLite's write lock).
        with session_scope(immediate=False) as stream_session:
            rows = export.export_rows(stream_session, subset)
            yield from (export.jsonl_chunks(rows) if format == "jsonl" else export.csv_chunks(rows))

    return StreamingResponse(chunks(), media_type=export.FORMATS[format], headers=headers)
