"""Who is calling: the token `TokenMiddleware` checked before routing, as a dependency."""

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from backend.auth.middleware import MISSING, STATE_KEY
from backend.auth.tables import ApiToken
from backend.errors import AppError

# Declares the security scheme in the OpenAPI document; the check itself is the middleware's.
_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`")


def current_token(request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None,
                                                            Depends(_bearer)]) -> ApiToken:
    token = getattr(request.state, STATE_KEY, None)
    if token is None:  # a route served without TokenMiddleware in front: refuse rather than trust it
        raise AppError(401, MISSING)
    return token


CurrentToken = Annotated[ApiToken, Depends(current_token)]
