"""Sign-in and sign-out, API tokens, users. Who may call what is in backend.auth.access."""

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import select

from backend.audit import trail
from backend.auth.dependencies import CurrentPrincipal, current_principal
from backend.auth.middleware import SESSION_COOKIE, STATE_KEY, client_address
from backend.auth.passwords import MIN_LENGTH
from backend.auth.roles import ROLES, allows
from backend.auth.service import (
    AuthError,
    create_token,
    create_user,
    end_session,
    revoke_token,
    sign_in,
    start_session,
    update_user,
)
from backend.auth.tables import ApiToken, User, UserSession
from backend.database import SessionDep
from backend.errors import AppError, not_found
from backend.params import Limit, Offset, PathId
from backend.settings import get_settings

router = APIRouter(tags=["auth"])
# The middleware signs every caller in before routing; routes without a principal parameter also ask for one,
# so a route served without the middleware in front refuses rather than trusts.
SIGNED_IN = [Depends(current_principal)]
Role = Annotated[str, Field(pattern="^(" + "|".join(ROLES) + ")$", description="viewer, manager or admin")]
STRICT_BODY = ConfigDict(extra="forbid")  # a misspelt field is an error, not silently ignored
NO_NUL = r"^[^\u0000]*$"  # stated in the schema: text with NUL is refused (422) before any query sees it
SIGN_IN_FAILED = "Sign-in failed: the name or the password is wrong, or the user is disabled."


class SignIn(BaseModel):
    model_config = STRICT_BODY
    name: str = Field(min_length=1, max_length=64, pattern=NO_NUL)
    password: str = Field(min_length=1, max_length=1024, pattern=NO_NUL)


class SessionRead(BaseModel):
    signed_in: bool = Field(True, description="False: no valid credentials came with the request (the rest is null)")
    user_id: int | None
    name: str | None
    role: str | None
    via: str | None = Field(description="session (browser) or token")
    csrf_token: str | None = Field(None, description="A browser session's token to send as X-CSRF-Token with "
                                                      "every change; None for a bearer token")


class TokenCreate(BaseModel):
    model_config = STRICT_BODY
    name: str = Field(min_length=1, max_length=100, pattern=NO_NUL)
    role: Role | None = Field(None, description="Narrower than yours, or yours when left out")
    expires_at: datetime | None = Field(None, description="When it stops working (UTC); never when left out")


class TokenRead(BaseModel):
    id: int
    name: str
    user_id: int
    user: str
    role: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


class TokenCreated(TokenRead):
    token: str = Field(description="The secret, shown this once")


class UserCreate(BaseModel):
    model_config = STRICT_BODY
    name: str = Field(min_length=1, max_length=64, pattern=NO_NUL, description="Unique; not blank")
    role: Role
    password: str | None = Field(None, min_length=MIN_LENGTH, max_length=1024, pattern=NO_NUL,
                                 description="For the browser; without it the user signs in with tokens only")


class UserUpdate(BaseModel):
    model_config = STRICT_BODY
    role: Role | None = None
    password: str | None = Field(None, min_length=MIN_LENGTH, max_length=1024, pattern=NO_NUL)
    disabled: bool | None = None


class UserRead(BaseModel):
    id: int
    name: str
    role: str
    disabled: bool
    has_password: bool
    created_at: datetime


def _user_read(user: User) -> UserRead:
    return UserRead(id=user.id, name=user.name, role=user.role, disabled=user.disabled,
                    has_password=user.password_hash is not None, created_at=user.created_at)


def _token_read(token: ApiToken, user: User) -> TokenRead:
    return TokenRead(id=token.id, name=token.name, user_id=user.id, user=user.name, role=token.role,
                     created_at=token.created_at, expires_at=token.expires_at, last_used_at=token.last_used_at,
                     revoked_at=token.revoked_at)


@router.post("/session", responses={401: {"description": "Wrong name or password"},
                                    429: {"description": "Too many failed sign-ins from this address"}})
def sign_in_route(body: SignIn, request: Request, response: Response, session: SessionDep) -> SessionRead:
    """Sign in with name and password: sets the HttpOnly session cookie and returns the CSRF token."""
    limiter = request.app.state.auth_limiter
    address = client_address(request.scope)
    wait = limiter.retry_after(address)
    if wait is not None:
        raise AppError(429, f"Too many failed sign-ins from this address: try again in {wait} s.")
    user = sign_in(session, body.name, body.password)
    if user is None:
        limiter.fail(address)
        raise AppError(401, SIGN_IN_FAILED)
    previous = request.cookies.get(SESSION_COOKIE)
    if previous:  # this browser's earlier session ends with the new sign-in
        end_session(session, cookie=previous)
    settings = get_settings()
    _, cookie, csrf = start_session(session, user, settings.session_hours)
    trail.identify(user.id, user.name, "session")
    response.set_cookie(SESSION_COOKIE, cookie, max_age=int(settings.session_hours * 3600), httponly=True,
                        samesite="strict", path="/",
                        secure=settings.secure_cookies or request.url.scheme == "https")
    return SessionRead(user_id=user.id, name=user.name, role=user.role, via="session", csrf_token=csrf)


@router.get("/session")
def who_am_i(request: Request, session: SessionDep) -> SessionRead:
    """Who this request acts as (and, for a browser session, its CSRF token, so a reloaded page has it);
    `signed_in: false` without valid credentials: the page asks this before it knows."""
    principal = getattr(request.state, STATE_KEY, None)
    if principal is None:
        return SessionRead(signed_in=False, user_id=None, name=None, role=None, via=None)
    browser = session.get(UserSession, principal.session_id) if principal.session_id is not None else None
    return SessionRead(user_id=principal.user_id, name=principal.name, role=principal.role, via=principal.via,
                       csrf_token=browser.csrf_token if browser else None)


@router.delete("/session", status_code=204, response_class=Response)
def sign_out(principal: CurrentPrincipal, session: SessionDep) -> Response:
    """End this browser session on the server and clear its cookie (a token is not ended: revoke it instead)."""
    if principal.session_id is not None:
        end_session(session, session_id=principal.session_id)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/tokens")
def list_tokens(principal: CurrentPrincipal, session: SessionDep,
                all_users: Annotated[bool, Query(description="Every user's tokens (admin only)")] = False,
                limit: Limit = 100, offset: Offset = 0) -> list[TokenRead]:
    """Your tokens (an admin may ask for everyone's), newest first; secrets are never shown again."""
    if all_users and principal.role != "admin":
        raise AppError(403, "Only an admin may list every user's tokens; leave out all_users for yours.")
    query = select(ApiToken, User).join(User, User.id == ApiToken.user_id)
    if not all_users:
        query = query.where(ApiToken.user_id == principal.user_id)
    rows = session.exec(query.order_by(ApiToken.id.desc()).offset(offset).limit(limit)).all()
    return [_token_read(token, user) for token, user in rows]


@router.post("/tokens", status_code=201, responses={422: {"description": "A role wider than yours, or a past expiry"}})
def create_token_route(body: TokenCreate, principal: CurrentPrincipal, session: SessionDep) -> TokenCreated:
    """A token for scripts and the CLI, with your role or a narrower one, and an expiry if asked."""
    user = session.get(User, principal.user_id)
    role = body.role or principal.role
    if not allows(principal.role, role):  # a narrowed token makes tokens no wider than itself
        raise AppError(422, f"Token not created: you act as {principal.role}, so a new token can have that role "
                            f"or a narrower one, not {role}.")
    try:
        token, secret = create_token(session, user, body.name, role=role, expires_at=body.expires_at)
    except AuthError as exc:
        raise AppError(422, f"Token not created: {exc}.") from None
    return TokenCreated(**_token_read(token, user).model_dump(), token=secret)


@router.delete("/tokens/{token_id}", status_code=204, response_class=Response,
               responses={409: {"description": "The token this request is made with"}})
def revoke_token_route(token_id: PathId(ApiToken, "Token"), principal: CurrentPrincipal,
                       session: SessionDep) -> Response:
    """Revoke a token: it stops working at once. Yours, or anyone's for an admin; not the one this request uses."""
    token = session.get(ApiToken, token_id)
    if token is None:
        raise not_found("Token", token_id)
    if token.id == principal.token_id:
        raise AppError(409, "This request is made with that token: revoke it with another token or from the "
                            "browser, so you are not locked out midway.")
    revoke_token(session, token)
    return Response(status_code=204)


@router.get("/users", dependencies=SIGNED_IN)
def list_users(session: SessionDep, limit: Limit = 100, offset: Offset = 0) -> list[UserRead]:
    return [_user_read(u) for u in session.exec(select(User).order_by(User.id).offset(offset).limit(limit))]


@router.post("/users", status_code=201, dependencies=SIGNED_IN,
             responses={422: {"description": "Name taken, unknown role, short password"}})
def create_user_route(body: UserCreate, session: SessionDep) -> UserRead:
    try:
        return _user_read(create_user(session, body.name, body.role, body.password))
    except AuthError as exc:
        raise AppError(422, f"User not created: {exc}.") from None


@router.patch("/users/{user_id}", responses={
    409: {"description": "Disabling yourself or changing your own role"},
    422: {"description": "Unknown role, short password, last admin"}})
def update_user_route(user_id: PathId(User, "User"), body: UserUpdate, principal: CurrentPrincipal,
                      session: SessionDep) -> UserRead:
    """Change a user's role or password, or disable them (which ends their sessions; tokens stop working)."""
    user = session.get(User, user_id)
    if user is None:
        raise not_found("User", user_id)
    if user.id == principal.user_id and (body.disabled or (body.role is not None and body.role != user.role)):
        raise AppError(409, "You cannot disable yourself or change your own role; another admin can.")
    try:
        return _user_read(update_user(session, user, role=body.role, password=body.password, disabled=body.disabled))
    except AuthError as exc:
        raise AppError(422, f"User not changed: {exc}.") from None
