"""API tokens: random secrets shown once, stored as sha256 hashes."""

import hashlib
import secrets

from sqlmodel import Session, select

from backend.auth.tables import ApiToken


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def find_token(session: Session, token: str) -> ApiToken | None:
    return session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).first()


def create_token(session: Session, name: str, *, is_admin: bool = False, token: str | None = None) -> str:
    token = token or "bl_" + secrets.token_urlsafe(32)
    session.add(ApiToken(name=name, token_hash=hash_token(token), is_admin=is_admin))
    session.flush()
    return token


def ensure_admin_token(session: Session, configured: str | None) -> str | None:
    """Make sure an admin can sign in. Returns a newly generated token (to print once), else None.

    A configured token is registered if missing; without one, a token is generated only when no
    admin token exists yet, so restarts do not mint new secrets.
    """
    if configured:
        if find_token(session, configured) is None:
            create_token(session, "admin (BUDGETLAB_ADMIN_TOKEN)", is_admin=True, token=configured)
        return None
    if session.exec(select(ApiToken).where(ApiToken.is_admin)).first() is not None:
        return None
    return create_token(session, "admin", is_admin=True)
