"""Engine and sessions. The request commits once; services only flush."""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Annotated

from fastapi import Depends
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine

from backend.settings import get_settings


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # API and worker write the same file
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


@lru_cache
def get_engine() -> Engine:
    settings = get_settings()
    if settings.is_sqlite:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    return make_engine(settings.sqlalchemy_url)


@contextmanager
def session_scope() -> Iterator[Session]:
    """A unit of work outside a request (worker, CLI): commit on success, roll back on error."""
    with Session(get_engine(), expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def get_session() -> Iterator[Session]:
    with session_scope() as session:
        yield session


# scope="function": the commit happens before the response is sent, so a 201 means committed.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_or_404(session: Session, table: type, ident: object):
    """The row with this primary key, or the 404 that says how to list what exists."""
    from backend.errors import not_found

    row = session.get(table, ident)
    if row is None:
        raise not_found(table.__name__, ident)
    return row
