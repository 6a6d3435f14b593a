from datetime import datetime

from sqlmodel import Field, SQLModel

from backend.timeutil import utcnow


class ApiToken(SQLModel, table=True):
    __tablename__ = "api_token"
    id: int | None = Field(default=None, primary_key=True)
    name: str
    token_hash: str = Field(unique=True, description="sha256 of the token; the token itself is never stored")
    is_admin: bool = False
    created_at: datetime = Field(default_factory=utcnow)
