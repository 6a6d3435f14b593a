"""Pools API: upload (streamed), presets, the demo pool, listing, prompts with scores, deletion.

Mounted under /api with the token check applied by backend.app.
"""

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from backend.database import SessionDep
from backend.errors import AppError
from backend.pools import service
from backend.pools.ingest import EXTENSIONS, FORMATS, IngestError
from backend.pools.presets import PRESETS, resolve_upload_options
from backend.pools.schemas import PoolRead, PromptOrder, PromptPage, UploadForm
from backend.settings import get_settings

router = APIRouter(tags=["pools"])

# Room for the multipart framing and the small text fields on top of the file itself.
UPLOAD_OVERHEAD_BYTES = 1 << 20
_FORM_FIELDS = ("name", "format", "preset", "prompt_field", "answer_field", "id_field", "task_type")


def _size_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _too_large(limit: int) -> IngestError:
    return IngestError(413, f"The file is larger than the upload limit of {_size_text(limit)} "
                            f"(BUDGETLAB_MAX_UPLOAD_BYTES). Upload a smaller pool, or ask the administrator to raise "
                            f"the limit.")


async def _limited(stream: AsyncIterator[bytes], limit: int, file_limit: int) -> AsyncIterator[bytes]:
    """The request body, refused with 413 as soon as it grows past `limit` bytes."""
    received = 0
    async for chunk in stream:
        received += len(chunk)
        if received > limit:
            raise _too_large(file_limit)
        yield chunk


async def _read_upload_form(request: Request, limit: int) -> FormData:
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise AppError(415, "Send the pool as multipart/form-data with the file in a field named 'file', e.g. "
                            "curl -H 'Authorization: Bearer <token>' -F file=@pool.jsonl -F prompt_field=question "
                            ".../api/pools")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + UPLOAD_OVERHEAD_BYTES:
        raise _too_large(limit)
    parser = MultiPartParser(request.headers, _limited(request.stream(), limit + UPLOAD_OVERHEAD_BYTES, limit),
                             max_files=1, max_fields=len(_FORM_FIELDS) + 4)
    try:
        return await parser.parse()
    except MultiPartException as exc:
        raise AppError(400, f"The upload is not valid multipart form data ({exc.message}). Send one file in the "
                            f"field 'file' and the options as text fields.") from None


_UPLOAD_SCHEMA: dict[str, Any] = UploadForm.model_json_schema()
_UPLOAD_SCHEMA["properties"]["file"] = {"type": "string", "format": "binary",
                                        "description": UploadForm.model_fields["file"].description}


@router.post(
    "/pools", status_code=201, response_model=PoolRead,
    summary="Upload a pool (JSONL, CSV, TSV, Parquet or BIG-Bench JSON), streamed into the database",
    openapi_extra={"requestBody": {"required": True,
                                   "content": {"multipart/form-data": {"schema": _UPLOAD_SCHEMA}}}},
    responses={400: {"description": "the file cannot be read (the message names the line)"},
               413: {"description": "the file is over BUDGETLAB_MAX_UPLOAD_BYTES"},
               415: {"description": "unknown format"},
               422: {"description": "missing field, empty prompts, duplicate ids or answers that cannot be graded"}},
)
async def upload_pool(request: Request, session: SessionDep) -> PoolRead:
    limit = get_settings().max_upload_bytes
    form = await _read_upload_form(request, limit)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise AppError(422, "The form has no file: send the pool file in a multipart field named 'file'.")
        if upload.size is not None and upload.size > limit:
            raise _too_large(limit)
        if upload.size == 0:
            raise IngestError(400, f"The file '{upload.filename}' is empty (0 bytes). Upload a file with at least "
                                   f"one prompt.")
        options = {key: (str(form.get(key)).strip() or None) if form.get(key) is not None else None
                   for key in _FORM_FIELDS}
        mapping, task_type, fallback_format = resolve_upload_options(
            options["preset"], prompt_field=options["prompt_field"], answer_field=options["answer_field"],
            id_field=options["id_field"], task_type=options["task_type"])
        pool = await run_in_threadpool(
            service.import_pool, session, upload.file, upload.filename, mapping, task_type, options["name"],
            fmt=options["format"], fallback_format=fallback_format)
        return PoolRead.model_validate(pool)
    finally:
        await form.close()


@router.get("/pools", summary="All pools, newest first")
def list_pools(session: SessionDep) -> list[PoolRead]:
    return [PoolRead.model_validate(pool) for pool in service.list_pools(session)]


@router.get("/pools/presets", summary="Upload presets and supported formats")
def list_presets() -> dict[str, Any]:
    return {
        "presets": [{"name": p.name, "title": p.title, "prompt_field": p.mapping.prompt_field,
                     "answer_field": p.mapping.answer_field, "id_field": p.mapping.id_field,
                     "task_type": p.task_type, "format": p.format} for p in PRESETS.values()],
        "formats": [{"name": name, "description": description,
                     "extensions": [ext for ext, fmt in EXTENSIONS.items() if fmt == name]}
                    for name, description in FORMATS.items()],
        "max_upload_bytes": get_settings().max_upload_bytes,
    }


@router.post("/pools/demo", status_code=201, summary="Create the demo pool: ~200 generated arithmetic word problems")
def create_demo_pool(session: SessionDep) -> PoolRead:
    return PoolRead.model_validate(service.create_demo_pool(session))


@router.get("/pools/{pool_id}")
def get_pool(pool_id: int, session: SessionDep) -> PoolRead:
    return PoolRead.model_validate(service.get_pool(session, pool_id))


@router.get("/pools/{pool_id}/prompts", summary="A page of prompts, with scores from a probe")
def list_prompts(
    pool_id: int,
    session: SessionDep,
    order: Annotated[PromptOrder, Query(description="position; difficulty: easiest first; -difficulty: hardest "
                                                    "first (unscored prompts last)")] = "position",
    probe_id: Annotated[int | None, Query(description="whose scores; default: the newest probe that "
                                                      "succeeded")] = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> PromptPage:
    return service.list_prompts(session, pool_id, order=order, probe_id=probe_id, limit=limit, offset=offset)


@router.delete("/pools/{pool_id}", status_code=204, response_class=Response,
               summary="Delete a pool with its prompts, probes, scores and subsets")
def delete_pool(pool_id: int, session: SessionDep) -> Response:
    service.delete_pool(session, pool_id)
    return Response(status_code=204)
