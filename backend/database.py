"""Engine and sessions. The request commits once; services only flush.

On SQLite a unit of work that writes begins with BEGIN IMMEDIATE: it takes the database's one write lock
before its first read, so a read-check-write (lock_job, then a transition) cannot interleave with another
connection's write, and a second writer waits (busy_timeout) instead of failing with "database is locked"
when its read lock cannot be upgraded. SELECT ... FOR UPDATE means nothing to SQLite; this is its lock.
Units that only read (GET requests) begin deferred: in WAL mode they never wait for a writer.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from backend.settings import get_settings

# Execution option of a connection whose transactions begin with BEGIN IMMEDIATE on SQLite (no effect elsewhere).
IMMEDIATE = "budgetlab_begin_immediate"
_READ_ONLY_METHODS = frozenset({"GET", "HEAD"})


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # API and worker write the same file
            dbapi_conn.isolation_level = None  # pysqlite's own (deferred, DML-only) BEGIN off: _sqlite_begin sends it
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(IMMEDIATE) else "BEGIN")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


@lru_cache
def get_engine() -> Engine:
    settings = get_settings()
    if settings.is_sqlite:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    return make_engine(settings.sqlalchemy_url)


@contextmanager
def session_scope(*, immediate: bool = True) -> Iterator[Session]:
    """A unit of work outside a request (worker, CLI): commit on success, roll back on error.

    `immediate` (SQLite): take the write lock when the transaction begins, so what it reads cannot change
    before it writes. False for a unit that only reads (it then never waits for a writer, and holds no lock
    while, say, a response streams), or that writes only in its last statements without reading the
    database before (the staged pool upload): it then holds the lock only for those."""
    engine = get_engine()
    with Session(engine.execution_options(**{IMMEDIATE: True}) if immediate else engine,
                 expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def get_session(request: Request) -> Iterator[Session]:
    """The request's unit of work: GET and HEAD only read (deferred); any other method may write (immediate)."""
    with session_scope(immediate=request.method not in _READ_ONLY_METHODS) as session:
        yield session


def get_deferred_session() -> Iterator[Session]:
    """A request's unit of work that takes SQLite's write lock only at its first write (see session_scope)."""
    with session_scope(immediate=False) as session:
        yield session


def get_writing_session() -> Iterator[Session]:
    """A request's unit of work that writes whatever its method (a GET that records what it handed out)."""
    with session_scope(immediate=True) as session:
        yield session


# scope="function": the commit happens before the response is sent, so a 201 means committed.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
DeferredSessionDep = Annotated[Session, Depends(get_deferred_session, scope="function")]
WritingSessionDep = Annotated[Session, Depends(get_writing_session, scope="function")]


def get_or_404(session: Session, table: type, ident: object):
    """The row with this primary key, or the 404 that says how to list what exists."""
    from backend.errors import not_found

    row = session.get(table, ident)
    if row is None:
        raise not_found(table.__name__, ident)
    return row
