"""Pools API: upload (streamed), presets, the demo pool, listing, prompts with scores, deletion.

Mounted under /api with the token check applied by backend.app.

The upload is parsed as it arrives: the multipart body is read chunk by chunk and the file's bytes
are handed, through a bounded queue, to the import running in a worker thread, which writes rows to
the database while the rest of the file is still on the wire. So the file is never held in memory,
the size limit is enforced while reading (413 as soon as it is crossed, or at once from
Content-Length), and upload and import overlap. The bytes are also written to a temporary file, which
serves Parquet (its index is at the end, so it is read only once complete), the rare re-read that
confirms a duplicate id, and uploads whose option fields come after the file (the import is then
redone from that copy with the complete options). On SQLite the rows are staged and the pool written
at the end, in one short stretch under the write lock (see backend.pools.service).
"""

import asyncio
import contextlib
import queue
import tempfile
import threading
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from backend.database import DeferredSessionDep, SessionDep
from backend.errors import AppError
from backend.params import INT64_MAX, Limit, Offset, PathId, QueryId
from backend.pools import service
from backend.pools.ingest import EXTENSIONS, FORMATS, IngestError, resolve_format
from backend.pools.presets import PRESETS, resolve_upload_options
from backend.pools.schemas import PoolImported, PoolRead, PromptOrder, PromptPage, UploadForm
from backend.pools.tables import Pool
from backend.probes.tables import Probe
from backend.settings import get_settings

router = APIRouter(tags=["pools"])
PoolId = PathId(Pool, "Pool")

# Room for the multipart framing and the small text fields on top of the file itself.
UPLOAD_OVERHEAD_BYTES = 1 << 20
MAX_FIELD_BYTES = 64 << 10
STREAM_QUEUE_CHUNKS = 64  # ~64 KiB each: at most a few MiB of the upload waits for the import
_FORM_FIELDS = ("name", "format", "preset", "prompt_field", "answer_field", "id_field", "task_type", "long_prompts")
LONG_PROMPTS = ("refuse", "truncate")


def _size_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _too_large(limit: int) -> IngestError:
    return IngestError(413, f"The file is larger than the upload limit of {_size_text(limit)} "
                            f"(BUDGETLAB_MAX_UPLOAD_BYTES). Upload a smaller pool, or ask the administrator to raise "
                            f"the limit.")


class _UploadAborted(Exception):
    """The request failed while the import was reading the file; the import stops and rolls back."""


class _ByteStream:
    """The uploaded file's bytes, put by the event loop and read by the import thread as a file object.
    Bounded: when the import falls behind, the upload waits (back-pressure), so memory stays flat."""

    def __init__(self) -> None:
        self._queue: queue.Queue[bytes | None] = queue.Queue(STREAM_QUEUE_CHUNKS)
        self._leftover = b""
        self._eof = False
        self._aborted = False
        self.closed = False
        self.reader_stopped = threading.Event()

    # --- the import thread's side (a read-only binary file) ---
    def read(self, size: int = -1) -> bytes:
        parts, total = [], 0
        if self._leftover:
            parts.append(self._leftover)
            total = len(self._leftover)
            self._leftover = b""
        while not self._eof and (size < 0 or total < size):
            try:
                item = self._queue.get(block=not parts)
            except queue.Empty:
                break
            if self._aborted:
                self._eof = True
                raise _UploadAborted("the upload was interrupted")
            if item is None:
                self._eof = True
                break
            parts.append(item)
            total += len(item)
        data = b"".join(parts)
        if 0 <= size < len(data):
            data, self._leftover = data[:size], data[size:]
        return data

    # --- the event loop's side ---
    async def put(self, data: bytes | None) -> None:
        """Queue `data` (None: end of file); a no-op once the import has stopped reading."""
        while not self.reader_stopped.is_set():
            try:
                self._queue.put_nowait(data)
                return
            except queue.Full:
                await asyncio.sleep(0.001)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.put(None)

    def abort(self) -> None:
        self._aborted = True
        self.closed = True
        while True:  # make room, then wake a reader blocked on get()
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        with contextlib.suppress(queue.Full):  # the queue was just emptied
            self._queue.put_nowait(None)


class _MultipartForm:
    """python-multipart callbacks: text fields are collected (small), file bytes are handed out as they come."""

    def __init__(self, limit: int):
        self.limit = limit
        self.fields: dict[str, str] = {}
        self.fields_at_file_start: dict[str, str] | None = None
        self.filename: str | None = None
        self.file_size = 0
        self.file_started = False
        self.file_ended = False
        self.complete = False  # the closing boundary arrived
        self.pending: list[bytes] = []
        self._part_name = ""
        self._part_is_file = False
        self._value = bytearray()
        self._header_name = b""
        self._header_value = b""
        self._disposition = b""

    @property
    def callbacks(self) -> dict[str, Any]:
        return {"on_part_begin": self._part_begin, "on_part_data": self._part_data, "on_part_end": self._part_end,
                "on_header_field": self._header_field, "on_header_value": self._header_value_data,
                "on_header_end": self._header_end, "on_headers_finished": self._headers_finished,
                "on_end": self._end}

    def _end(self) -> None:
        self.complete = True

    def _part_begin(self) -> None:
        self._part_name, self._part_is_file, self._value, self._disposition = "", False, bytearray(), b""

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if self._header_name.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name, self._header_value = b"", b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._part_name = options.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" not in options:
            return
        if self._part_name != "file" or self.file_started:
            raise AppError(422, "Send exactly one file, in the multipart field named 'file'.")
        self._part_is_file = True
        self.file_started = True
        self.filename = options[b"filename"].decode("utf-8", "replace")
        self.fields_at_file_start = dict(self.fields)

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._part_is_file:
            self.file_size += end - start
            if self.file_size > self.limit:
                raise _too_large(self.limit)
            self.pending.append(data[start:end])
        else:
            self._value += data[start:end]
            if len(self._value) > MAX_FIELD_BYTES:
                raise AppError(400, f"The form field {self._part_name!r} is longer than {MAX_FIELD_BYTES >> 10} KiB; "
                                    f"option fields are short text. Send the pool itself in the field 'file'.")

    def _part_end(self) -> None:
        if self._part_is_file:
            self.file_ended = True
        elif self._part_name:
            self.fields[self._part_name] = self._value.decode("utf-8", "replace")

    def take_pending(self) -> bytes:
        data = self.pending[0] if len(self.pending) == 1 else b"".join(self.pending)
        self.pending.clear()
        return data


def _options(fields: dict[str, str]) -> dict[str, str | None]:
    return {key: (fields.get(key) or "").strip() or None for key in _FORM_FIELDS}


class _ImportPlan:
    """What to import with the option fields as they stand: the mapping, task type, name and format."""

    def __init__(self, fields: dict[str, str], filename: str | None):
        options = _options(fields)
        self.options = options
        self.filename = filename
        self.mapping, self.task_type, self.fallback_format = resolve_upload_options(
            options["preset"], prompt_field=options["prompt_field"], answer_field=options["answer_field"],
            id_field=options["id_field"], task_type=options["task_type"])
        self.format = resolve_format(filename, options["format"], self.fallback_format)
        if (options["long_prompts"] or "refuse") not in LONG_PROMPTS:
            raise AppError(422, f"long_prompts must be refuse or truncate, got {options['long_prompts']!r}")

    def run(self, session, fileobj, reopen) -> service.ImportResult:
        return service.import_pool(session, fileobj, self.filename, self.mapping, self.task_type,
                                   self.options["name"], fmt=self.format, reopen=reopen,
                                   truncate_long=self.options["long_prompts"] == "truncate")


def _streamable_plan(form: _MultipartForm) -> _ImportPlan | None:
    """The plan for importing while the file arrives, or None to wait for the whole upload (Parquet needs
    its footer; unknown formats or options get their error once every field has arrived)."""
    try:
        plan = _ImportPlan(form.fields, form.filename)
    except AppError:
        return None
    return None if plan.format == "parquet" else plan


async def _finished(task: "asyncio.Future[service.ImportResult]") -> "asyncio.Future[service.ImportResult]":
    """Wait until the import thread is done, even if this request is being cancelled: it must not be
    using the session while the request's session is rolled back and closed."""
    with anyio.CancelScope(shield=True):
        await asyncio.wait({task})
    return task


async def _settle(task: "asyncio.Future[service.ImportResult] | None") -> None:
    """Wait for a running import to finish; its outcome is no longer wanted."""
    if task is not None:
        finished = await _finished(task)
        if not finished.cancelled():
            finished.exception()  # retrieved, so it is not reported as unhandled


async def _receive_and_import(request: Request, session, limit: int) -> service.ImportResult:
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise AppError(415, "Send the pool as multipart/form-data with the file in a field named 'file', e.g. "
                            "curl -H 'Authorization: Bearer <token>' -F file=@pool.jsonl -F prompt_field=question "
                            ".../api/pools")
    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise AppError(400, "The multipart Content-Type has no boundary; let your HTTP client build the form.")
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + UPLOAD_OVERHEAD_BYTES:
        raise _too_large(limit)

    form = _MultipartForm(limit)
    parser = MultipartParser(boundary, form.callbacks)
    stream: _ByteStream | None = None
    task: asyncio.Future[service.ImportResult] | None = None
    received = 0
    with tempfile.NamedTemporaryFile(prefix="budgetlab-upload-") as copy:
        def reopen():
            return open(copy.name, "rb")

        def run_streaming(plan: _ImportPlan, byte_stream: _ByteStream) -> service.ImportResult:
            try:
                return plan.run(session, byte_stream, reopen)
            finally:
                byte_stream.reader_stopped.set()

        try:
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit + UPLOAD_OVERHEAD_BYTES:
                    raise _too_large(limit)
                try:
                    parser.write(chunk)
                except FormParserError as exc:
                    raise AppError(400, f"The upload is not valid multipart form data ({exc}). Send one file in "
                                        f"the field 'file' and the options as text fields.") from None
                if form.file_started and stream is None and task is None and not form.file_ended:
                    plan = _streamable_plan(form)
                    if plan is not None:
                        stream = _ByteStream()
                        task = asyncio.ensure_future(run_in_threadpool(run_streaming, plan, stream))
                if form.pending:
                    data = form.take_pending()
                    copy.write(data)
                    if stream is not None and not stream.reader_stopped.is_set():
                        copy.flush()  # a re-read through `reopen` must see every byte the import has
                        await stream.put(data)
                if form.file_ended and stream is not None:
                    await stream.close()
            parser.finalize()
            if not form.complete:
                raise AppError(400, "The upload ended before the multipart form was complete (no closing "
                                    "boundary); nothing was stored. Upload the file again.")
        except BaseException as exc:
            if stream is not None:
                stream.abort()
            await _settle(task)
            if isinstance(exc, ClientDisconnect):
                raise AppError(400, "The upload was interrupted before the whole file arrived; nothing was "
                                    "stored. Upload it again.") from None
            raise
        if stream is not None:
            await stream.close()

        if not form.file_started:
            await _settle(task)
            raise AppError(422, "The form has no file: send the pool file in a multipart field named 'file'.")
        if form.file_size == 0:
            await _settle(task)
            raise IngestError(400, f"The file '{form.filename}' is empty (0 bytes). Upload a file with at least "
                                   f"one prompt.")
        if task is not None:
            if _options(form.fields) == _options(form.fields_at_file_start or {}):
                return (await _finished(task)).result()
            # Options arrived after the file: the streamed import used incomplete ones. Redo it.
            await _settle(task)
            await run_in_threadpool(session.rollback)
        copy.flush()
        plan = _ImportPlan(form.fields, form.filename)
        with open(copy.name, "rb") as whole:
            return await run_in_threadpool(plan.run, session, whole, None)


_UPLOAD_SCHEMA: dict[str, Any] = UploadForm.model_json_schema()
_UPLOAD_SCHEMA["properties"]["file"] = {"type": "string", "format": "binary",
                                        "description": UploadForm.model_fields["file"].description}


@router.post(
    "/pools", status_code=201, response_model=PoolImported,
    summary="Upload a pool (JSONL, CSV, TSV, Parquet or BIG-Bench JSON), streamed into the database",
    openapi_extra={"requestBody": {"required": True,
                                   "content": {"multipart/form-data": {"schema": _UPLOAD_SCHEMA}}}},
    responses={400: {"description": "the file cannot be read (the message names the line)"},
               413: {"description": "the file is over BUDGETLAB_MAX_UPLOAD_BYTES"},
               415: {"description": "unknown format"},
               422: {"description": "missing field, empty prompts, duplicate ids or answers that cannot be graded"}},
)
async def upload_pool(request: Request, session: DeferredSessionDep) -> PoolImported:
    # Deferred: on SQLite the import stages its rows and takes the write lock only for its last statements.
    result = await _receive_and_import(request, session, get_settings().max_upload_bytes)
    return PoolImported(**PoolRead.model_validate(result.pool).model_dump(), report=result.report)


@router.get("/pools", summary="All pools, newest first")
def list_pools(session: SessionDep, limit: Limit = 100, offset: Offset = 0) -> list[PoolRead]:
    return [PoolRead.model_validate(pool) for pool in service.list_pools(session, limit=limit, offset=offset)]


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


class DemoCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    held_out: bool = Field(False, description="Create the 180-problem held-out pool to evaluate training on")


@router.post("/pools/demo", status_code=201, summary="Create the demo pool: 200 generated one-step number tasks")
def create_demo_pool(session: SessionDep, body: DemoCreate | None = None) -> PoolRead:
    return PoolRead.model_validate(service.create_demo_pool(session, held_out=bool(body and body.held_out)))


@router.get("/pools/{pool_id}")
def get_pool(pool_id: PoolId, session: SessionDep) -> PoolRead:
    return PoolRead.model_validate(service.get_pool(session, pool_id))


@router.get("/pools/{pool_id}/prompts", summary="A page of prompts, with scores from a probe")
def list_prompts(
    pool_id: PoolId,
    session: SessionDep,
    order: Annotated[PromptOrder, Query(description="position; difficulty: easiest first; -difficulty: hardest "
                                                    "first (unscored prompts last)")] = "position",
    probe_id: QueryId(Probe, "Probe", "whose scores; default: the newest probe that succeeded") = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
) -> PromptPage:
    return service.list_prompts(session, pool_id, order=order, probe_id=probe_id, limit=limit, offset=offset)


@router.delete("/pools/{pool_id}", status_code=204, response_class=Response,
               summary="Delete a pool with its prompts, probes, scores and subsets",
               responses={409: {"description": "A probe of the pool is still queued or running"}})
def delete_pool(pool_id: PoolId, session: SessionDep) -> Response:
    service.delete_pool(session, pool_id)
    return Response(status_code=204)
