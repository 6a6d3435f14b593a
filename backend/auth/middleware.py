"""Authentication, authorization and the audit draft, before routing: a refused request never has its body read.

FastAPI parses a JSON body before dependencies run, so a dependency-based check would let any client make the
server parse whatever it sends. This middleware matches the route itself, and from the headers alone:
1. refuses an address that sent too many bad credentials (429), before looking anything up;
2. resolves who calls, from `Authorization: Bearer <token>` or the session cookie (401 without either, and one
   message for every bad credential, so it never says which part was wrong);
3. for a session, checks the CSRF header on every state-changing method (403);
4. checks the route's rule in backend.auth.access: the role, and for `own` rules that a non-admin created
   the row (403 with what to do);
5. opens the audit draft (backend.audit.trail) and, if the request committed nothing, writes its row after.
Database work runs in a worker thread, so the event loop keeps serving.
"""

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie

import anyio
from sqlmodel import select
from starlette.routing import get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.audit import trail
from backend.auth.access import ACCESS, PUBLIC, Rule
from backend.auth.ratelimit import FailureLimiter
from backend.auth.roles import allows
from backend.auth.service import Principal, principal_for_session, principal_for_token, touch_token
from backend.database import session_scope
from backend.errors import problem_response

MISSING = ("Not signed in: sign in on the web page, or send 'Authorization: Bearer <token>' (the first admin's "
           "token and password are printed at first start; 'budgetlab token create' makes more).")
INVALID = ("Invalid credentials: the token or session is unknown, expired or revoked. Sign in again, or create a "
           "token with 'budgetlab token create'.")
CSRF = ("Missing or wrong CSRF token: a signed-in browser must send the X-CSRF-Token header it got at sign-in "
        "with every change. Reload the page.")
STATE_KEY = "principal"
SESSION_COOKIE = "budgetlab_session"
CSRF_HEADER = b"x-csrf-token"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def bearer_token(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, credentials = value.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


def session_cookie(scope: Scope) -> str | None:
    value = _header(scope, b"cookie")
    if not value:
        return None
    morsel = SimpleCookie(value).get(SESSION_COOKIE)
    return morsel.value if morsel else None


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str
    principal: Principal | None = None  # who was refused, once known (for the audit row)


def owned_tables() -> dict[str, tuple[type, str]]:
    """Path parameter of an `own` rule -> (table, the column naming its creator)."""
    from backend.auth.tables import ApiToken
    from backend.experiments.tables import Experiment
    from backend.jobs.tables import Job
    from backend.labels.tables import LabelSet
    from backend.pools.tables import Pool

    return {"pool_id": (Pool, "created_by_id"), "job_id": (Job, "created_by_id"),
            "experiment_id": (Experiment, "created_by_id"), "label_set_id": (LabelSet, "created_by_id"),
            "token_id": (ApiToken, "user_id")}


def authorize(bearer: str | None, cookie: str | None, csrf: str | None, method: str,
              rule: Rule | None, params: dict) -> Principal | Refusal:
    """Who calls and whether ``rule`` lets them (None: any valid caller), in one read of the database."""
    with session_scope(immediate=False) as session:  # reads never wait for SQLite's write lock
        if bearer is not None:
            found = principal_for_token(session, bearer)
            if found is None:
                return Refusal(401, INVALID)
            principal, due = found
        else:
            found = principal_for_session(session, cookie)
            if found is None:
                return Refusal(401, INVALID)
            principal, expected = found
            if method in UNSAFE and not secrets.compare_digest((csrf or "").encode(), expected.encode()):
                return Refusal(403, CSRF)
            due = False
        why = refusal_for(session, principal, rule, params) if rule is not None else None
    if why is not None:
        return Refusal(403, why, principal)
    if due:  # the token's last use, in a short write of its own
        with session_scope() as session:
            touch_token(session, principal.token_id)
    return principal


def refusal_for(session, principal: Principal, rule: Rule, params: dict) -> str | None:
    """Why ``principal`` may not take this operation, or None when it may."""
    if not allows(principal.role, rule.role):
        return (f"This needs the {rule.role} role and you act as {principal.role}"
                f"{' (the token is narrower than its user)' if principal.via == 'token' else ''}: "
                f"ask an admin.")
    if rule.own and principal.role != "admin" and rule.own in params:
        table, column = owned_tables()[rule.own]
        value = params[rule.own]
        if not (value.isascii() and value.isdigit()):  # fail closed: FastAPI itself would read "5.0" as 5
            return f"The id in the path must be a whole number, got {value!r}."
        found = session.exec(select(table.id, getattr(table, column)).where(table.id == int(value))).first()
        if found is not None and found[1] != principal.user_id:  # a missing row is the route's 404
            return (f"Only the user who created this {table.__tablename__.replace('_', ' ')} or an admin may do "
                    f"this; ask its creator or an admin.")
    return None


def api_routes(routes) -> list:
    """Every route, with FastAPI's included routers flattened (0.165 wraps them in a lazy `_IncludedRouter`;
    earlier versions list the routes themselves). Each has `path` (the template), `methods`, `path_regex`."""
    flat = []
    for route in routes:
        if hasattr(route, "effective_candidates"):
            flat += api_routes(route.effective_candidates())
        elif hasattr(route, "path_regex") and getattr(route, "methods", None):
            flat.append(route)
    return flat


DOCS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
DOCS_RULE = Rule("viewer", changes=False)  # the API's description, behind sign-in outside development


class AuthMiddleware:
    def __init__(self, app: ASGIApp, routes: Callable[[], list], limiter: FailureLimiter, protect_docs: bool):
        self.app = app
        self.routes = routes
        self.limiter = limiter
        self.protect_docs = protect_docs
        self._flat: list | None = None

    def match(self, path: str, method: str) -> tuple[Rule | None, str, dict]:
        """The route's rule (None when no route has this method), its template and path parameters."""
        if self._flat is None:  # routes are complete once the app serves
            self._flat = api_routes(self.routes())
        template, params = None, {}
        for route in self._flat:
            found = route.path_regex.match(path)
            if found is None:
                continue
            if method in route.methods:
                return ACCESS.get((method, route.path)), route.path, found.groupdict()
            template, params = template or route.path, params or found.groupdict()
        return None, template or path, params

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        route_path = get_route_path(scope)  # without a root_path, as Starlette routes it
        if route_path.startswith("/api/"):
            rule, path, params = self.match(route_path, scope["method"])
        elif self.protect_docs and route_path in DOCS:
            rule, path, params = DOCS_RULE, route_path, {}
        else:
            await self.app(scope, receive, send)
            return
        address = client_address(scope)
        bearer, cookie = bearer_token(scope), session_cookie(scope)
        if rule is not None and rule.role == PUBLIC:
            principal = None
            if rule.identifies and (bearer is not None or cookie is not None):  # who am I: anonymous if invalid
                found = await anyio.to_thread.run_sync(authorize, bearer, cookie, None, scope["method"], None, {})
                if isinstance(found, Principal):
                    principal = scope.setdefault("state", {})[STATE_KEY] = found
            await self._run(scope, receive, send, rule, path, params, address, principal)
            return
        # Not audited: a flood of refused requests must not become a flood of writes.
        wait = self.limiter.retry_after(address)
        if wait is not None:
            await self._refuse(scope, receive, send, 429, f"Too many failed sign-ins or bad credentials from "
                               f"this address: try again in {wait} s.", {"Retry-After": str(wait)})
            return
        if bearer is None and cookie is None:
            await self._refuse(scope, receive, send, 401, MISSING, {"WWW-Authenticate": "Bearer"})
            return
        found = await anyio.to_thread.run_sync(authorize, bearer, cookie, _header(scope, CSRF_HEADER),
                                               scope["method"], rule, params)
        if isinstance(found, Refusal):
            headers = None
            if found.detail == INVALID:
                self.limiter.fail(address)
                headers = {"WWW-Authenticate": "Bearer"}
                if bearer is None:  # a stale session cookie: drop it, so the next page load is not another failure
                    headers["Set-Cookie"] = f"{SESSION_COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=strict"
            await self._refuse(scope, receive, send, found.status, found.detail, headers,
                               audit=(rule, path, params, address, found.principal))
            return
        scope.setdefault("state", {})[STATE_KEY] = found
        await self._run(scope, receive, send, rule, path, params, address, found)

    async def _run(self, scope, receive, send, rule, path, params, address, principal) -> None:
        if rule is None or not rule.changes:
            await self.app(scope, receive, send)
            return
        draft = _draft(scope["method"], path, params, address, principal)
        status = 500

        async def capture(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        token = trail.open_draft(draft)
        try:
            await self.app(scope, receive, capture)
        finally:
            trail.close_draft(token)
            if not draft.written:
                await anyio.to_thread.run_sync(_write, draft, trail.outcome_of(status), status)

    async def _refuse(self, scope, receive, send, status, detail, headers, audit=None) -> None:
        if audit is not None and audit[0] is not None and audit[0].changes:
            rule, path, params, address, principal = audit
            await anyio.to_thread.run_sync(_write, _draft(scope["method"], path, params, address, principal),
                                           "refused", status)
        await problem_response(status, detail, headers=headers)(scope, receive, send)


def _draft(method: str, path: str, params: dict, address: str, principal: Principal | None) -> trail.Draft:
    segments = [s for s in path.removeprefix("/api/").split("/") if s and not s.startswith("{")]
    kind = (segments[0] if segments else "api").removesuffix("s").replace("-", "_")
    target = None
    if params:  # the last path parameter names what it acts on: {pool_id} -> "pool 12"
        name, value = list(params.items())[-1]
        target = f"{name.removesuffix('_id').replace('_', ' ')} {value}"
    draft = trail.Draft(operation=f"{method} {path}", kind=kind, address=address, target=target)
    if principal is not None:
        draft.user_id, draft.actor, draft.via = principal.user_id, principal.name, principal.via
    return draft


def _write(draft: trail.Draft, outcome: str, status: int) -> None:
    with session_scope() as session:
        draft.written = True
        session.add(draft.row(outcome, status))
