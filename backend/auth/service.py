"""Users, API tokens and browser sessions. Tokens and session cookies are random secrets shown once and
stored as sha256 hashes; passwords as argon2id hashes. Services flush; the caller commits."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlmodel import Session, select

from backend.auth.passwords import hash_password, verify_password
from backend.auth.roles import check_role, narrower
from backend.auth.tables import ApiToken, User, UserSession
from backend.timeutil import utcnow

LAST_USED_EVERY = timedelta(minutes=1)  # a token's last use is written at most this often (a write per request)


class AuthError(ValueError):
    """Bad input to a user or token operation; the message says what to change."""


@dataclass(frozen=True)
class Principal:
    """Who is calling, resolved from a token or a session cookie."""

    user_id: int
    name: str
    role: str  # effective: the narrower of the user's and the token's
    via: str  # "token" or "session"
    token_id: int | None = None
    session_id: int | None = None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# Users ---------------------------------------------------------------------------------------------------------

def find_user(session: Session, name: str) -> User | None:
    return session.exec(select(User).where(User.name == name)).first()


def create_user(session: Session, name: str, role: str, password: str | None = None) -> User:
    name = name.strip()
    if not name or len(name) > 64:
        raise AuthError("a user name must have 1 to 64 characters")
    try:
        check_role(role)
        password_hash = hash_password(password) if password is not None else None
    except ValueError as exc:
        raise AuthError(str(exc)) from None
    if find_user(session, name) is not None:
        raise AuthError(f"a user named {name!r} exists already; pick another name")
    user = User(name=name, role=role, password_hash=password_hash)
    session.add(user)
    session.flush()
    return user


def update_user(session: Session, user: User, *, role: str | None = None, password: str | None = None,
                disabled: bool | None = None) -> User:
    """Checked before anything changes: a refused update leaves the user as it was."""
    try:
        new_role = check_role(role) if role is not None else user.role
        password_hash = hash_password(password) if password is not None else None
    except ValueError as exc:
        raise AuthError(str(exc)) from None
    new_disabled = user.disabled if disabled is None else disabled
    if user.role == "admin" and not user.disabled and (new_role != "admin" or new_disabled):
        others = select(User).where(User.role == "admin", User.disabled == False, User.id != user.id)  # noqa: E712
        if session.exec(others).first() is None:
            raise AuthError("this is the last active admin: make another user admin first")
    user.role, user.disabled = new_role, new_disabled
    if password_hash is not None:
        user.password_hash = password_hash
    if disabled or password is not None:  # signs them out everywhere
        for row in session.exec(select(UserSession).where(UserSession.user_id == user.id)):
            session.delete(row)
    session.add(user)
    session.flush()
    return user


def sign_in(session: Session, name: str, password: str) -> User | None:
    """The user if the name and password match an active user; None otherwise (never says which part)."""
    user = find_user(session, name)
    ok = verify_password(user.password_hash if user else None, password)
    return user if ok and user is not None and not user.disabled else None


# Tokens --------------------------------------------------------------------------------------------------------

def create_token(session: Session, user: User, name: str, *, role: str | None = None,
                 expires_at: datetime | None = None, token: str | None = None) -> tuple[ApiToken, str]:
    """A new token for ``user`` (its secret returned once). ``role`` may narrow the user's, never widen it."""
    role = role or user.role
    try:
        check_role(role)
    except ValueError as exc:
        raise AuthError(str(exc)) from None
    if narrower(role, user.role) != role:
        raise AuthError(f"a token cannot have more rights than its user: {user.name} is {user.role}, "
                        f"so ask for {user.role} or a narrower role")
    if expires_at is not None and expires_at.tzinfo is None:
        expires_at = expires_at.replace(tzinfo=UTC)  # a time without a zone is UTC, as the API says
    if expires_at is not None and expires_at <= utcnow():
        raise AuthError("the expiry must lie in the future")
    token = token or "bl_" + secrets.token_urlsafe(32)
    row = ApiToken(name=name, token_hash=hash_secret(token), user_id=user.id, role=role, expires_at=expires_at)
    session.add(row)
    session.flush()
    return row, token


def revoke_token(session: Session, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        session.add(token)
        session.flush()
    return token


def principal_for_token(session: Session, secret: str) -> tuple[Principal, bool] | None:
    """Who a bearer token speaks for, and whether its last use is due to be written (at most once a minute);
    None if it is unknown, revoked, expired or its user disabled."""
    row = session.exec(select(ApiToken, User).join(User, User.id == ApiToken.user_id)
                       .where(ApiToken.token_hash == hash_secret(secret))).first()
    if row is None:
        return None
    token, user = row
    now = utcnow()
    if token.revoked_at is not None or (token.expires_at and token.expires_at <= now) or user.disabled:
        return None
    due = token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY
    return Principal(user.id, user.name, narrower(token.role, user.role), "token", token_id=token.id), due


def touch_token(session: Session, token_id: int) -> None:
    token = session.get(ApiToken, token_id)
    if token is not None:
        token.last_used_at = utcnow()
        session.add(token)


# Sessions ------------------------------------------------------------------------------------------------------

def start_session(session: Session, user: User, hours: float) -> tuple[UserSession, str, str]:
    """A browser session: (row, cookie secret, CSRF token), the secrets returned once."""
    cookie, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    row = UserSession(user_id=user.id, token_hash=hash_secret(cookie), csrf_token=csrf,
                      expires_at=utcnow() + timedelta(hours=hours))
    session.add(row)
    session.flush()
    return row, cookie, csrf


def principal_for_session(session: Session, cookie: str) -> tuple[Principal, str] | None:
    """Who a session cookie speaks for, with the session's CSRF token; None if unknown, ended or expired."""
    row = session.exec(select(UserSession, User).join(User, User.id == UserSession.user_id)
                       .where(UserSession.token_hash == hash_secret(cookie))).first()
    if row is None:
        return None
    user_session, user = row
    if user_session.expires_at <= utcnow() or user.disabled:
        return None
    return Principal(user.id, user.name, user.role, "session", session_id=user_session.id), user_session.csrf_token


def end_session(session: Session, *, session_id: int | None = None, cookie: str | None = None) -> None:
    """Sign a browser session out (by its id, or by its cookie); nothing if it is gone already."""
    row = (session.get(UserSession, session_id) if session_id is not None else
           session.exec(select(UserSession).where(UserSession.token_hash == hash_secret(cookie))).first())
    if row is not None:
        session.delete(row)
        session.flush()


# The first admin -----------------------------------------------------------------------------------------------

def ensure_first_admin(session: Session, token: str | None = None, password: str | None = None) -> dict[str, str]:
    """Make sure an admin can sign in; returns the secrets generated now (to print once), by what they are.

    The first start creates the user ``admin`` with the configured password (or a generated one, for the
    browser) and the configured token (or a generated one, for scripts). Later starts only register a
    configured token that is missing, and give a first admin from before passwords (migration 0012) the
    configured or a generated password, so restarts mint no new secrets.
    """
    printed: dict[str, str] = {}
    admin = session.exec(select(User).where(User.role == "admin").order_by(User.id)).first()
    if admin is None:
        if not password:
            password = printed["password"] = secrets.token_urlsafe(12)
        admin = create_user(session, "admin", "admin", password)
        if not token:
            printed["token"] = create_token(session, admin, "admin")[1]
    elif admin.password_hash is None:  # an admin from before passwords (migration 0012): the browser needs one
        if not password:
            password = printed["password"] = secrets.token_urlsafe(12)
        update_user(session, admin, password=password)
    if token and session.exec(select(ApiToken).where(ApiToken.token_hash == hash_secret(token))).first() is None:
        create_token(session, admin, "admin (BUDGETLAB_ADMIN_TOKEN)", token=token)
    return printed
