"""Which workers are alive: each worker process writes a beat row every few seconds (see
worker/liveness.py); readers count the fresh ones. The database is the ledger here too, so this works
the same for the embedded worker, a fleet on Redis, and a broker (SQLite) that has no remote control."""

from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlmodel import Session, select

from backend.timeutil import utcnow
from backend.workers.tables import WorkerBeat

# A worker is alive while its last beat is younger than this many beat intervals.
STALE_AFTER_BEATS = 3
# Rows of workers that died without a goodbye are pruned after a day.
PRUNE_AFTER = timedelta(days=1)


def record_beat(session: Session, name: str, hostname: str, pid: int, queues: str,
                now: datetime | None = None) -> None:
    now = now or utcnow()
    beat = session.get(WorkerBeat, name)
    if beat is None:
        session.add(WorkerBeat(name=name, hostname=hostname, pid=pid, queues=queues, started_at=now, seen_at=now))
    else:
        beat.seen_at = now
    session.execute(delete(WorkerBeat).where(WorkerBeat.seen_at < now - PRUNE_AFTER))


def remove_beat(session: Session, name: str) -> None:
    session.execute(delete(WorkerBeat).where(WorkerBeat.name == name))


def alive_workers(session: Session, beat_seconds: float, now: datetime | None = None) -> list[WorkerBeat]:
    cutoff = (now or utcnow()) - timedelta(seconds=STALE_AFTER_BEATS * beat_seconds)
    return list(session.exec(select(WorkerBeat).where(WorkerBeat.seen_at >= cutoff).order_by(WorkerBeat.name)))
