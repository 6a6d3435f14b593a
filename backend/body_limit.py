"""A cap on request bodies, checked before routing: by Content-Length at once, and while streaming
(chunked bodies have no length), so a client cannot make the API buffer or parse megabytes of JSON.

Multipart uploads have limits of their own: the pool upload streams to disk and enforces
BUDGETLAB_MAX_UPLOAD_BYTES itself; a labels file is read whole, under MAX_LABELS_FILE_BYTES. Anything
else sent to their paths is capped like any JSON body.
"""

import re

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.errors import problem_response

MAX_JSON_BODY_BYTES = 1 << 20
MAX_LABELS_FILE_BYTES = 128 << 20


def too_large_text(limit: int) -> str:
    if limit > MAX_JSON_BODY_BYTES:
        return (f"The file is larger than {limit >> 20} MiB, the limit for this upload; split it into smaller "
                f"files and send them one by one.")
    return (f"The request body is larger than {limit >> 10} KiB, the limit for JSON requests; send a smaller "
            f"body (pools are uploaded as files with POST /api/pools).")


class BodyTooLarge(HTTPException):
    """Raised from `receive` once the streamed body crosses the limit. An HTTPException, so FastAPI passes
    it through its body parsing to the error handlers, which answer 413."""

    def __init__(self, limit: int):
        super().__init__(413, too_large_text(limit))


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, limit: int = MAX_JSON_BODY_BYTES,
                 uploads: tuple[tuple[str, str, int | None], ...] = ()):
        self.app = app
        self.limit = limit
        # (method, path regex, limit) of multipart uploads with a limit of their own; None: the route's own
        self.uploads = [(method, re.compile(path), upload_limit) for method, path, upload_limit in uploads]

    def _limit(self, scope: Scope) -> int | None:
        content_type = next((value for name, value in scope["headers"] if name == b"content-type"), b"")
        if content_type.startswith(b"multipart/form-data"):
            for method, path, upload_limit in self.uploads:
                if scope["method"] == method and path.fullmatch(scope["path"]):
                    return upload_limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self._limit(scope) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        length = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if length is not None and length.isdigit() and int(length) > limit:
            await problem_response(413, too_large_text(limit))(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, limited_receive, send)
