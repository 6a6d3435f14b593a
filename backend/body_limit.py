"""A cap on request bodies, checked before routing: by Content-Length at once, and while streaming
(chunked bodies have no length), so a client cannot make the API buffer or parse megabytes of JSON.

The pool upload (multipart) is exempt: it streams to disk and enforces BUDGETLAB_MAX_UPLOAD_BYTES itself;
anything else sent to its path is capped like any JSON body.
"""

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.errors import problem_response

MAX_JSON_BODY_BYTES = 1 << 20


def too_large_text(limit: int) -> str:
    return (f"The request body is larger than {limit >> 10} KiB, the limit for JSON requests; send a smaller "
            f"body (pools are uploaded as files with POST /api/pools).")


class BodyTooLarge(HTTPException):
    """Raised from `receive` once the streamed body crosses the limit. An HTTPException, so FastAPI passes
    it through its body parsing to the error handlers, which answer 413."""

    def __init__(self, limit: int):
        super().__init__(413, too_large_text(limit))


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, limit: int = MAX_JSON_BODY_BYTES,
                 exempt: frozenset[tuple[str, str]] = frozenset()):
        self.app = app
        self.limit = limit
        self.exempt = exempt  # (method, path) of multipart uploads with a limit of their own

    def _is_exempt(self, scope: Scope) -> bool:
        content_type = next((value for name, value in scope["headers"] if name == b"content-type"), b"")
        return (scope["method"], scope["path"]) in self.exempt and content_type.startswith(b"multipart/form-data")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._is_exempt(scope):
            await self.app(scope, receive, send)
            return
        length = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if length is not None and length.isdigit() and int(length) > self.limit:
            await problem_response(413, too_large_text(self.limit))(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited_receive, send)
