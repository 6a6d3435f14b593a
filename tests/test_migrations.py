"""Migrations: one head, and `alembic upgrade head` on an empty database gives exactly the tables
(and columns) the models declare."""

import pytest
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


# --- upgrades keep every row (issue 7 §3) ------------------------------------------------------------

ROWS_PER_TABLE = 2
# Columns whose old values a migration corrects on purpose: {table: {column}}.
DATA_FIXES = {"subset": {"predicted_learnable_share"}, "api_token": {"is_admin"}}  # 0012: is_admin -> role


def _value(column, i: int, parents: dict[str, list[dict]]):
    """A value for row i of a column: a foreign key points at the parent's row i, others by type."""
    from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, Numeric

    for fk in column.foreign_keys:
        return parents[fk.column.table.name][i][fk.column.name]
    kind = column.type
    if isinstance(kind, Boolean):
        return i % 2 == 0
    if isinstance(kind, Integer):
        return 100 + i
    if isinstance(kind, Float | Numeric):
        return 0.25 + i
    if isinstance(kind, DateTime):
        from datetime import datetime

        return datetime(2026, 1, 1 + i)
    if isinstance(kind, JSON):
        return {"row": i}
    return f"{column.table.name}-{column.name}-{i}"


def _fill_every_table(url: str) -> dict[str, tuple[list[str], list[tuple]]]:
    """Rows in every table the database has at its revision, by reflection (so it fits any revision):
    {table: (columns, rows sorted)}."""
    from sqlalchemy import MetaData

    engine = create_engine(url)
    try:
        reflected = MetaData()
        reflected.reflect(engine)
        tables = [t for t in reflected.sorted_tables if t.name != "alembic_version"]
        rows: dict[str, list[dict]] = {}
        with engine.begin() as connection:
            for table in tables:
                rows[table.name] = [{c.name: _value(c, i, rows) for c in table.columns}
                                    for i in range(ROWS_PER_TABLE)]
                connection.execute(table.insert(), rows[table.name])
    finally:
        engine.dispose()
    return {name: _read(url, name, [c.name for c in reflected.tables[name].columns]) for name in rows}


def _read(url: str, table: str, columns: list[str]) -> tuple[list[str], list[tuple]]:
    from sqlalchemy import MetaData, select

    engine = create_engine(url)
    try:
        reflected = MetaData()
        reflected.reflect(engine, only=[table])
        with engine.connect() as connection:
            rows = connection.execute(select(*(reflected.tables[table].c[c] for c in columns))).all()
        return columns, sorted(tuple(row) for row in rows)
    finally:
        engine.dispose()


def _earlier_revisions() -> list[str]:
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in script.walk_revisions() if rev.revision != script.get_current_head()]


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    name, url = create_pg_database()
    yield url
    drop_pg_database(name)


@pytest.mark.parametrize("revision", _earlier_revisions())
def test_upgrade_from_every_earlier_revision_keeps_every_row(empty_database, revision):
    from alembic import command

    command.upgrade(alembic_config(empty_database), revision)
    before = _fill_every_table(empty_database)
    assert set(before) >= {"pool", "prompt", "probe", "sample", "prompt_score", "subset", "job"}
    upgrade_head(empty_database)
    for name, (columns, rows) in before.items():
        # Migrations so far only add columns: every old column is still there with its values,
        # but for the placeholders a migration corrects on purpose (checked below).
        kept = [c for c in columns if c not in DATA_FIXES.get(name, ())]
        expected = sorted(tuple(row[columns.index(c)] for c in kept) for row in rows)
        assert _read(empty_database, name, kept)[1] == expected, f"{name} changed from revision {revision} to head"
    if revision < "0007":  # 0007 nulls the 0.0 a label-free probe's subset stored for "no forecast"
        shares = dict(_read(empty_database, "subset", ["probe_id", "predicted_learnable_share"])[1])
        label_free = dict(_read(empty_database, "probe", ["id", "label_free"])[1])
        assert sorted(shares) == sorted(label_free) and set(label_free.values()) == {True, False}
        assert {probe: share is None for probe, share in shares.items()} == label_free


def test_a_migration_that_breaks_a_foreign_key_is_rolled_back(tmp_path):
    """foreign_key_check runs before the SQLite upgrade commits: a dangling row fails it, and the
    database stays at its old revision with every row."""
    from alembic import command

    url = f"sqlite:///{tmp_path / 'dangling.db'}"
    command.upgrade(alembic_config(url), "0003")
    before = _fill_every_table(url)
    engine = create_engine(url)
    try:
        with engine.begin() as connection:  # a row whose parent is gone (foreign keys are off by default)
            connection.exec_driver_sql("DELETE FROM pool WHERE id = 100")
    finally:
        engine.dispose()
    with pytest.raises(Exception, match="pointing at missing parents"):
        upgrade_head(url)
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one() == "0003"
            assert connection.exec_driver_sql("SELECT count(*) FROM run_metric").scalar_one() == len(
                before["run_metric"][1])
            ddl = connection.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'probe'").scalar_one()
            assert "AUTOINCREMENT" not in ddl
    finally:
        engine.dispose()


def test_processes_starting_together_migrate_once():
    """An API and its workers started together all run the migrations: on Postgres they take turns
    under an advisory lock, and the later ones find the schema at head (issue 9, deployment)."""
    import subprocess
    import sys

    from sqlalchemy import text

    from tests.conftest import ROOT

    name, url = create_pg_database()
    try:
        code = "import sys; from backend.migrate import upgrade_head; upgrade_head(sys.argv[1])"
        procs = [subprocess.Popen([sys.executable, "-c", code, url], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(4)]
        outputs = [(proc.wait(timeout=300), proc.stdout.read()) for proc in procs]
        assert [rc for rc, _ in outputs] == [0, 0, 0, 0], "\n".join(out[-2000:] for _, out in outputs)
        engine = create_engine(url)
        with engine.connect() as conn:
            versions = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        engine.dispose()
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert versions == [head]
    finally:
        drop_pg_database(name)


def test_downgrading_0012_drops_the_tokens_that_must_not_work_without_roles(tmp_path):
    """Revoked, expiring and viewer tokens, and those of disabled users, would do everything after 0011."""
    from alembic import command
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'down.db'}"
    upgrade_head(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO app_user (id, name, role, disabled, created_at) VALUES "
                                "(1, 'a', 'admin', 0, '2026-01-01'), (2, 'b', 'manager', 1, '2026-01-01')"))
        connection.execute(text(
            "INSERT INTO api_token (name, token_hash, user_id, role, created_at, expires_at, revoked_at) VALUES "
            "('keep', 'h1', 1, 'admin', '2026-01-01', NULL, NULL), "
            "('manager', 'h2', 1, 'manager', '2026-01-01', NULL, NULL), "
            "('revoked', 'h3', 1, 'admin', '2026-01-01', NULL, '2026-01-02'), "
            "('expiring', 'h4', 1, 'admin', '2026-01-01', '2099-01-01', NULL), "
            "('viewer', 'h5', 1, 'viewer', '2026-01-01', NULL, NULL), "
            "('disabled', 'h6', 2, 'manager', '2026-01-01', NULL, NULL)"))
    engine.dispose()
    command.downgrade(alembic_config(url), "0011")
    engine = create_engine(url)
    with engine.connect() as connection:
        left = connection.execute(text("SELECT name, is_admin FROM api_token ORDER BY name")).all()
    engine.dispose()
    assert [(name, bool(admin)) for name, admin in left] == [("keep", True), ("manager", False)]
