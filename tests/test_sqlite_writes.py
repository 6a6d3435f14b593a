"""SQLite (the embedded default): units that write begin with BEGIN IMMEDIATE, so a read-check-write is
atomic. Without it two claims of one queued job both read `queued` and both start it (a lost update);
pysqlite's deferred transactions could also fail with "database is locked" on the upgrade."""

import contextlib
import threading
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from tests.conftest import clear_caches, upgrade_head

THREADS = 4


@pytest.fixture
def sqlite_db(service_env, tmp_path, monkeypatch):
    """The settings pointed at a fresh, migrated SQLite file; restored after."""
    url = f"sqlite:///{tmp_path / 'budgetlab.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("BUDGETLAB_DATA_DIR", str(tmp_path))
    clear_caches()
    upgrade_head(url)
    yield url
    monkeypatch.undo()
    clear_caches()


def _writer():
    """A connection whose transactions begin with BEGIN IMMEDIATE, as a writing unit's do."""
    from backend.database import IMMEDIATE, get_engine

    return get_engine().execution_options(**{IMMEDIATE: True}).connect()


def _queued_job() -> int:
    from backend.database import session_scope
    from backend.jobs.service import create_job

    with session_scope() as session:
        return create_job(session, "probe").id


def test_concurrent_read_check_write_starts_a_job_once(sqlite_db):
    from backend.database import session_scope
    from backend.jobs.service import TransitionError, events, lock_job, transition
    from backend.jobs.tables import Job, JobStatus

    job_id = _queued_job()
    # Each unit reads the job, then waits (up to 1 s) for the others to have read it too, then writes.
    # With BEGIN IMMEDIATE the others are still waiting for the write lock; they read the new status after.
    barrier = threading.Barrier(THREADS)
    outcomes: list[str] = []

    def start() -> None:
        try:
            with session_scope() as session:
                job = lock_job(session, job_id)
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=1)
                transition(session, job, JobStatus.running, "claimed by a test thread")
            outcomes.append("started")
        except TransitionError:
            outcomes.append("refused")
        except OperationalError as exc:
            outcomes.append(f"error: {exc.orig}")

    threads = [threading.Thread(target=start) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["refused"] * (THREADS - 1) + ["started"], outcomes
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert (job.status, job.attempts) == ("running", 1)
        assert [(e.from_status, e.to_status) for e in events(session, job_id)] == [(None, "queued"),
                                                                                  ("queued", "running")]


def _race(job_id: int, *actions) -> list[BaseException]:
    """Run each action(session, locked job) in its own unit and thread, all reading before any writes (unless
    the write lock keeps them apart); the errors other than TransitionError (a refusal, which is fine)."""
    from backend.database import session_scope
    from backend.jobs.service import TransitionError, lock_job

    barrier = threading.Barrier(len(actions))
    errors: list[BaseException] = []

    def run(action) -> None:
        try:
            with session_scope() as session:
                job = lock_job(session, job_id)
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=0.5)
                action(session, job)
        except TransitionError:
            pass
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def test_cancel_racing_a_start_is_never_lost(sqlite_db):
    """request_cancel (lock, check, write) against a start: whatever the order, the cancel is recorded."""
    from backend.database import session_scope
    from backend.jobs.service import events, request_cancel, transition
    from backend.jobs.tables import Job, JobStatus

    def start(session, job) -> None:
        transition(session, job, JobStatus.running, "start")

    for _ in range(5):
        job_id = _queued_job()
        assert _race(job_id, start, request_cancel) == []
        with session_scope() as session:
            status = session.get(Job, job_id).status
            path = [e.to_status for e in events(session, job_id)]
        assert (status, path) in (("cancelled", ["queued", "cancelled"]),
                                  ("cancelling", ["queued", "running", "cancelling"])), (status, path)


def test_readers_do_not_wait_for_a_writer(sqlite_db):
    """A read-only unit begins deferred: in WAL mode it reads while another connection holds the write lock."""
    from backend.database import session_scope
    from backend.jobs.tables import Job

    job_id = _queued_job()
    with _writer() as writer:  # a long writing unit, holding the write lock
        writer.execute(text("UPDATE job SET message = 'busy' WHERE id = :id"), {"id": job_id})
        started = time.monotonic()
        with session_scope(immediate=False) as session:
            assert session.get(Job, job_id).message != "busy"  # the last committed state
        assert time.monotonic() - started < 1
        writer.rollback()


def test_writers_queue_behind_the_write_lock(sqlite_db):
    """A writing unit waits for the lock (busy_timeout) rather than failing; it then sees what was committed."""
    from backend.database import session_scope
    from backend.jobs.service import lock_job

    job_id = _queued_job()
    seen: list[str] = []

    def write_after() -> None:
        with session_scope() as session:
            job = lock_job(session, job_id)
            seen.append(job.message)
            job.message = "second"
            session.add(job)

    with _writer() as first:
        first.execute(text("UPDATE job SET message = 'first' WHERE id = :id"), {"id": job_id})
        thread = threading.Thread(target=write_after)
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive()  # waiting for the lock
        first.commit()
    thread.join(timeout=30)
    assert seen == ["first"]
