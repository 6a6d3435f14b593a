"""Who may act: users, their API tokens and browser sessions. Secrets are stored only as hashes."""

from datetime import datetime

from sqlalchemy import Column, ForeignKey, Integer
from sqlmodel import Field, SQLModel

from backend.timeutil import utcnow


class User(SQLModel, table=True):
    __tablename__ = "app_user"  # "user" is reserved in Postgres
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    role: str = Field(description="viewer, manager or admin (backend.auth.roles)")
    password_hash: str | None = Field(default=None, description="argon2id; None: no browser sign-in, tokens only")
    disabled: bool = Field(default=False, description="A disabled user's sessions and tokens are refused")
    created_at: datetime = Field(default_factory=utcnow)


class ApiToken(SQLModel, table=True):
    __tablename__ = "api_token"
    id: int | None = Field(default=None, primary_key=True)
    name: str
    token_hash: str = Field(unique=True, description="sha256 of the token; the token itself is never stored")
    user_id: int = Field(sa_column=Column(Integer, ForeignKey("app_user.id", ondelete="CASCADE"), index=True,
                                          nullable=False))
    role: str = Field(description="The token's role: its user's or a narrower one; the narrower of the two applies")
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class UserSession(SQLModel, table=True):
    """A browser sign-in: the cookie's hash, and the CSRF token the page sends with every change (kept as is: it
    is handed to whoever holds the cookie, and alone it opens nothing). Signing out deletes the row."""

    __tablename__ = "user_session"
    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(sa_column=Column(Integer, ForeignKey("app_user.id", ondelete="CASCADE"), index=True,
                                          nullable=False))
    token_hash: str = Field(unique=True)
    csrf_token: str
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime


def created_by_field():
    """The user who created a row (None: the system, or before users existed); kept when the user is deleted."""
    return Field(default=None, sa_column=Column(Integer, ForeignKey("app_user.id", ondelete="SET NULL"), index=True,
                                                nullable=True))
