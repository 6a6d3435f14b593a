"""Migrations: one head, and `alembic upgrade head` on an empty database gives exactly the tables
(and columns) the models declare."""

from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from backend.migrate import alembic_config, upgrade_head
from backend.tables import metadata
from tests.conftest import create_pg_database, drop_pg_database


def test_single_head():
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, heads


def _schema(url: str) -> dict[str, set[str]]:
    engine = create_engine(url)
    try:
        inspector = inspect(engine)
        return {t: {c["name"] for c in inspector.get_columns(t)} for t in inspector.get_table_names()
                if t != "alembic_version"}
    finally:
        engine.dispose()


def _declared() -> dict[str, set[str]]:
    return {name: {c.name for c in table.columns} for name, table in metadata.tables.items()}


def test_upgrade_head_on_empty_postgres_matches_models():
    name, url = create_pg_database()
    try:
        upgrade_head(url)
        assert _schema(url) == _declared()
    finally:
        drop_pg_database(name)


def test_upgrade_head_on_empty_sqlite_matches_models(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade_head(url)
    assert _schema(url) == _declared()
