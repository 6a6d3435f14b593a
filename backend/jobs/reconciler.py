"""The reconciler: one pass finds work that nobody will finish and acts on it, recording every action as a
job event (reason "reconciler: ..."). Run by `budgetlab serve` on the embedded default, and by its own
process (`budgetlab reconcile`) in deployment. Reads elsewhere never change a job; this does.

A pass, in order:
1. jobs whose inputs were deleted are failed;
2. tasks past their hard time limit fail their job (a hung worker renews nothing, but a slow loop might);
3. tasks whose lease expired lost their worker: run again, or the job fails (the kind decides);
4. `cancelling` jobs that no live worker holds are settled as cancelled;
5. the outbox: tasks never sent (the API died, the broker was down) are sent; tasks sent long ago that no
   worker claimed while their queue is empty were lost by the broker, and are sent again.
Several reconcilers may run: on Postgres steps 1-4 hold an advisory lock, and a second reconciler skips its turn;
sending (step 5) is safe to repeat, since a worker claims a task once.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import text, update
from sqlmodel import Session, select

from backend.database import session_scope
from backend.jobs import broker, dispatch
from backend.jobs.engine import lost
from backend.jobs.kinds import get_kind
from backend.jobs.service import fail_unless_finished, lock_job, record_event, transition
from backend.jobs.tables import FINISHED, Job, JobStatus, JobTask
from backend.settings import get_settings
from backend.timeutil import format_duration, utcnow

log = logging.getLogger(__name__)

RECONCILE_LOCK_KEY = 4_718_300_002  # pg_try_advisory_xact_lock: one pass at a time across processes
SEND_GRACE_SECONDS = 10  # the API sends its own tasks right after the commit; the reconciler waits this long


@dataclass
class Pass:
    """What one pass did, job ids per action (for logs and tests)."""

    vanished: list[int] = field(default_factory=list)
    timed_out: list[int] = field(default_factory=list)
    rerun: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)
    skipped: bool = False

    def __bool__(self) -> bool:
        return any([self.vanished, self.timed_out, self.rerun, self.lost, self.cancelled, self.sent])


def _unfinished() -> list[str]:
    return [s.value for s in JobStatus if s not in FINISHED]


def reconcile_once() -> Pass:
    done = Pass()
    with session_scope() as session:
        if not _take_turn(session):
            done.skipped = True
            return done
        now = utcnow()
        _fail_vanished(session, done)
        _fail_timed_out(session, now, done)
        _recover_expired(session, now, done)
        _settle_cancelling(session, now, done)
        session.commit()
        _send_outbox(session, now, done)
    if done:
        log.info("reconciler: %s", done)
    return done


def _take_turn(session: Session) -> bool:
    if session.get_bind().dialect.name != "postgresql":
        return True  # SQLite: one serve process on one file
    return bool(session.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": RECONCILE_LOCK_KEY}).scalar())


def _fail_vanished(session: Session, done: Pass) -> None:
    for job in session.exec(select(Job).where(Job.status.in_(_unfinished()))).all():
        try:
            kind = get_kind(job.kind)
        except KeyError:
            continue
        if not kind.inputs_exist(session, job):
            fail_unless_finished(session, job.id, f"reconciler: what this {kind.title.lower()} job works on was "
                                                  "deleted while it waited or ran; nothing is left to do.")
            done.vanished.append(job.id)


def _open_tasks(session: Session, *conditions) -> list[JobTask]:
    return list(session.exec(select(JobTask).join(Job, Job.id == JobTask.job_id).where(
        JobTask.completed_at.is_(None), Job.status.in_(_unfinished()), *conditions).order_by(JobTask.id)))


def _fail_timed_out(session: Session, now, done: Pass) -> None:
    for task in _open_tasks(session, JobTask.claimed_at.is_not(None), JobTask.lease_owner.is_not(None)):
        if task.claimed_at + timedelta(seconds=task.hard_limit_seconds) >= now:
            continue
        kind = get_kind(session.get(Job, task.job_id).kind)
        fail_unless_finished(session, task.job_id, (
            f"reconciler: {kind.title} stopped: {task.label} ran past its hard time limit of "
            f"{format_duration(task.hard_limit_seconds)} (its worker {task.lease_owner} may hang). Check that "
            "worker; a slower machine needs a lower BUDGETLAB_SLOWEST_TOKENS_PER_SECOND."))
        done.timed_out.append(task.job_id)


def _recover_expired(session: Session, now, done: Pass) -> None:
    for candidate in _open_tasks(session, JobTask.lease_expires_at < now):
        job = lock_job(session, candidate.job_id)
        task = session.exec(select(JobTask).where(JobTask.id == candidate.id).with_for_update()
                            .execution_options(populate_existing=True)).one()
        if JobStatus(job.status) in FINISHED or task.completed_at or not task.lease_expires_at or \
                task.lease_expires_at >= now:  # settled meanwhile
            continue
        silent = format_duration((now - task.lease_expires_at).total_seconds() + get_settings().lease_seconds)
        outcome = lost(session, get_kind(job.kind), job, task,
                       f"reconciler: the lease of {task.lease_owner} expired (silent for {silent})")
        if outcome == "rerun":
            task.sent_at = None  # back in the outbox: sent below
            session.add(task)
            done.rerun.append(job.id)
        else:
            done.lost.append(job.id)


def _settle_cancelling(session: Session, now, done: Pass) -> None:
    for job_id in session.exec(select(Job.id).where(Job.status == JobStatus.cancelling.value)).all():
        job = lock_job(session, job_id)
        if job.status != JobStatus.cancelling.value:
            continue
        live = session.exec(select(JobTask.id).where(JobTask.job_id == job_id, JobTask.completed_at.is_(None),
                                                     JobTask.lease_expires_at >= now)).first()
        if live is None:
            transition(session, job, JobStatus.cancelled, "reconciler: cancel requested and no worker holds any "
                                                          "of its tasks")
            done.cancelled.append(job_id)


def _send_outbox(session: Session, now, done: Pass) -> None:
    settings = get_settings()
    unsent = [t.job_id for t in _open_tasks(session, JobTask.sent_at.is_(None),
                                            JobTask.created_at < now - timedelta(seconds=SEND_GRACE_SECONDS))]
    stale = _open_tasks(session, JobTask.sent_at < now - timedelta(seconds=settings.resend_unclaimed_seconds),
                        JobTask.lease_owner.is_(None))
    if stale:
        session.commit()  # no transaction (on SQLite: no write lock) stays open while the broker is asked
        try:
            depths = broker.queue_depths()
        except Exception as exc:
            log.warning("reconciler: the broker cannot be reached (%s); nothing resent this pass", exc)
            depths = {}
        for task in stale:
            # Unclaimed for long while its queue is empty: the message is gone (a broker restarted without its
            # data, or a worker took it and died before claiming). Sending again is safe: claims are checked.
            queue = get_kind(session.get(Job, task.job_id).kind).queue
            if depths.get(queue) == 0 and (task.claimed_at is None or task.claimed_at < task.sent_at):
                reason = (f"reconciler: {task.label} was sent {format_duration((now - task.sent_at).total_seconds())}"
                          f" ago and no worker took it while the {queue} queue is empty; sending it again")
                record_event(session, lock_job(session, task.job_id), reason)
                session.execute(update(JobTask).where(JobTask.id == task.id).values(sent_at=None))
                unsent.append(task.job_id)
        session.commit()
    if unsent:
        problems = dispatch.send_unsent(session, job_ids=sorted(set(unsent)))
        if not problems:
            done.sent.extend(sorted(set(unsent)))


class Reconciler:
    """Runs a pass every `every` seconds on a thread (the embedded default's serve), until stopped."""

    def __init__(self, every: float | None = None):
        self.every = every or get_settings().reconcile_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reconciler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                reconcile_once()
            except Exception:  # a database hiccup: the next pass tries again
                log.exception("reconciler pass failed")

    def start(self) -> Reconciler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every + 30)
