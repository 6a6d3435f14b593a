import os

from fastapi import APIRouter, BackgroundTasks
from fastapi.responses import FileResponse, StreamingResponse

from backend.database import SessionDep, session_scope
from backend.errors import AppError
from backend.subsets import export, service
from backend.subsets.schemas import SelectionPreview, SelectionRequest, SubsetCreate, SubsetRead

router = APIRouter(tags=["selections"])


@router.post("/selections/preview")
def preview_selection(body: SelectionRequest, session: SessionDep) -> SelectionPreview:
    return service.preview(session, body)


@router.post("/subsets", status_code=201)
def freeze_subset(body: SubsetCreate, session: SessionDep) -> SubsetRead:
    return service.subset_read(session, service.freeze(session, body))


@router.get("/subsets")
def list_subsets(session: SessionDep, probe_id: int | None = None) -> list[SubsetRead]:
    return [service.subset_read(session, s) for s in service.list_subsets(session, probe_id)]


@router.get("/subsets/{subset_id}")
def get_subset(subset_id: int, session: SessionDep) -> SubsetRead:
    return service.subset_read(session, service.get_subset(session, subset_id))


@router.get("/subsets/{subset_id}/export", response_model=None)
def export_subset(subset_id: int, session: SessionDep, background: BackgroundTasks,
                  format: str = "jsonl") -> StreamingResponse | FileResponse:
    if format not in export.FORMATS:
        raise AppError(422, f"Unknown export format '{format}'; use one of: {', '.join(export.FORMATS)}.")
    subset = service.get_subset(session, subset_id)
    filename = f"subset-{subset.id}.{format}"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
    if format == "parquet":
        path = export.write_parquet(export.export_rows(session, subset))
        background.add_task(os.remove, path)
        return FileResponse(path, media_type=export.FORMATS[format], headers=headers)

    def chunks():
        # Streams after the handler returns, so it reads through a session of its own.
        with session_scope() as stream_session:
            rows = export.export_rows(stream_session, subset)
            yield from (export.jsonl_chunks(rows) if format == "jsonl" else export.csv_chunks(rows))

    return StreamingResponse(chunks(), media_type=export.FORMATS[format], headers=headers)
