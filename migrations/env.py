from alembic import context
from sqlalchemy import create_engine, event

from backend.database import make_engine
from backend.settings import get_settings
from backend.tables import metadata

config = context.config


class ForeignKeyViolation(RuntimeError):
    """A migration left rows whose parent is missing; the whole upgrade is rolled back."""


def _url() -> str:
    # Tests and tools pass a URL explicitly; otherwise the application's settings decide.
    return config.attributes.get("url") or config.get_main_option("sqlalchemy.url") or get_settings().sqlalchemy_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _sqlite_migration_engine(url: str):
    """SQLite rebuilds a table in batch mode by copy, drop, rename. With foreign keys on, the drop
    cascades into the children (it deleted every run_metric row once), so migrations run with them
    off, in one explicit transaction (pysqlite would otherwise commit each DDL statement on its own),
    and `PRAGMA foreign_key_check` decides whether that transaction may commit."""
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # we send BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=OFF")  # only takes effect outside a transaction
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _check_foreign_keys(connection) -> None:
    violations = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
    if violations:
        shown = ", ".join(f"{table} row {rowid} -> {parent}" for table, rowid, parent, _ in violations[:10])
        raise ForeignKeyViolation(
            f"The migration would leave {len(violations)} row(s) pointing at missing parents ({shown}); "
            "nothing was changed. Report this with the database file.")


def run_migrations_online() -> None:
    url = _url()
    sqlite = url.startswith("sqlite")
    engine = _sqlite_migration_engine(url) if sqlite else make_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn, check_foreign_keys=sqlite)
    finally:
        engine.dispose()


# Any constant of our own: the key of the Postgres advisory lock the migrations run under.
MIGRATION_LOCK_KEY = 0x6275646765746C62  # "budgetlb"


def _run(connection, check_foreign_keys: bool = False) -> None:
    # transactional_ddl: the whole upgrade commits or rolls back as one (SQLite supports it once
    # pysqlite's own transaction handling is off, see above).
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                      compare_type=True, transactional_ddl=True)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # An API and its workers start together and each migrates: they take turns (the lock ends
            # with the transaction), and the later ones read the version the first one committed.
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
        context.run_migrations()
        if check_foreign_keys:
            _check_foreign_keys(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
