"""Alembic from code: `upgrade_head()` brings any configured database to the current schema."""

from pathlib import Path

from alembic import command
from alembic.config import Config

ROOT = Path(__file__).resolve().parent.parent


def alembic_config(url: str | None = None) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    if url:
        config.attributes["url"] = url
    return config


def upgrade_head(url: str | None = None) -> None:
    command.upgrade(alembic_config(url), "head")
