"""Who is calling, as resolved by `AuthMiddleware` before routing, as a dependency."""

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from backend.auth.middleware import MISSING, SESSION_COOKIE, STATE_KEY
from backend.auth.service import Principal
from backend.errors import AppError

# Declare the security schemes in the OpenAPI document; the checks themselves are the middleware's.
_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`")
_cookie = APIKeyCookie(name=SESSION_COOKIE, auto_error=False,
                       description="The browser's session cookie from `POST /api/session`, with the "
                                   "`X-CSRF-Token` header on every change")


def current_principal(request: Request,
                      _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                      _session: Annotated[str | None, Depends(_cookie)]) -> Principal:
    principal = getattr(request.state, STATE_KEY, None)
    if principal is None:  # a route served without AuthMiddleware in front: refuse rather than trust it
        raise AppError(401, MISSING)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]
