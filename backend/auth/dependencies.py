from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from backend.auth.service import find_token
from backend.auth.tables import ApiToken
from backend.database import SessionDep
from backend.errors import AppError

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`")


def current_token(
    session: SessionDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> ApiToken:
    if credentials is None:
        raise AppError(401, "Missing API token: send 'Authorization: Bearer <token>' "
                            "(the admin token is printed at first start, or set BUDGETLAB_ADMIN_TOKEN).")
    token = find_token(session, credentials.credentials)
    if token is None:
        raise AppError(401, "Unknown API token: check it, or create one with 'budgetlab token create'.")
    return token


CurrentToken = Annotated[ApiToken, Depends(current_token)]
