"""The bearer-token check, before routing: a request without a valid token never has its body read.

FastAPI reads and parses a JSON body before dependencies run, so a dependency-based check lets an
anonymous client make the server parse whatever it sends. This middleware answers 401 from the
headers alone. The token is looked up in the database (sync SQLAlchemy) in a worker thread, so the
event loop keeps serving; the row it finds is handed to the `current_token` dependency via the
request state.
"""

from collections.abc import Callable

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.auth.service import find_token
from backend.auth.tables import ApiToken
from backend.database import session_scope
from backend.errors import problem_response

MISSING = ("Missing API token: send 'Authorization: Bearer <token>' (the admin token is printed at first start, "
           "or set BUDGETLAB_ADMIN_TOKEN).")
UNKNOWN = "Unknown API token: check it, or create one with 'budgetlab token create'."
STATE_KEY = "api_token"


def bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
            return None
    return None


def lookup(token: str) -> ApiToken | None:
    with session_scope(immediate=False) as session:  # a read: never waits for SQLite's write lock
        found = find_token(session, token)
        if found is not None:
            session.expunge(found)  # read after the session closes
        return found


class TokenMiddleware:
    def __init__(self, app: ASGIApp, is_protected: Callable[[str], bool]):
        self.app = app
        self.is_protected = is_protected

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS" or not self.is_protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        found = await anyio.to_thread.run_sync(lookup, token) if token else None
        if found is None:
            response = problem_response(401, UNKNOWN if token else MISSING, headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[STATE_KEY] = found
        await self.app(scope, receive, send)
