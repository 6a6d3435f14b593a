"""The audit trail: one row per state-changing request, in the same transaction as its change.

The auth middleware opens a `Draft` for a request whose rule says it changes state and keeps it in a context
variable, which follows the request into the threads that run its handlers. The first commit made while it is
open (the request's unit of work, or an upload's own) adds the row before committing, so the change and its
record stand or fall together. A request that commits nothing (refused, failed, or a no-op) gets its row
afterwards, in a transaction of its own, with the HTTP status. Workers have no draft and write no rows.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from sqlalchemy import event
from sqlmodel import Session  # the app's sessions only: the SQLite broker's own (kombu) are left alone

from backend.audit.tables import AuditEvent

_current: ContextVar[Draft | None] = ContextVar("audit_draft", default=None)

# Which created row names the target of a request without one in its path, most specific first.
_CREATED = ("experiment", "run", "subset", "probe", "label_set", "pool", "api_token", "app_user", "job")


@dataclass
class Draft:
    operation: str
    kind: str
    address: str | None
    user_id: int | None = None
    actor: str = "anonymous"
    via: str = "none"
    target: str | None = None
    created: dict[str, int] = field(default_factory=dict)
    written: bool = False  # its row committed (with the change, or on its own)
    pending: object = None  # the session whose commit carries the row, until it commits or rolls back

    def row(self, outcome: str, status: int | None = None) -> AuditEvent:
        target = self.target
        if target is None:
            for table in _CREATED:
                if table in self.created:
                    target = f"{table.replace('app_', '').replace('_', ' ')} {self.created[table]}"
                    break
        return AuditEvent(user_id=self.user_id, actor=self.actor, via=self.via, operation=self.operation,
                          kind=self.kind, target=target, address=self.address, outcome=outcome, status=status)


def open_draft(draft: Draft):
    return _current.set(draft)


def close_draft(token) -> None:
    _current.reset(token)


def current_draft() -> Draft | None:
    return _current.get()


def identify(user_id: int, name: str, via: str) -> None:
    """Name who acts, for a request that learns it in its handler (the sign-in)."""
    draft = _current.get()
    if draft is not None:
        draft.user_id, draft.actor, draft.via = user_id, name, via


def outcome_of(status: int) -> str:
    if status in (401, 403, 429):
        return "refused"
    return "succeeded" if status < 400 else "failed"


@event.listens_for(Session, "after_flush")
def _note_created(session: Session, _context) -> None:
    draft = _current.get()
    if draft is None or draft.written:
        return
    for obj in session.new:
        table = getattr(obj, "__tablename__", None)
        if table in _CREATED and table not in draft.created and getattr(obj, "id", None) is not None:
            draft.created[table] = obj.id


@event.listens_for(Session, "before_commit")
def _write_with_the_change(session: Session) -> None:
    draft = _current.get()
    if draft is None or draft.written or draft.pending is not None:
        return
    session.flush()  # so rows created in this unit are named
    draft.pending = session
    session.add(draft.row("succeeded"))


@event.listens_for(Session, "after_commit")
def _written(session: Session) -> None:
    draft = _current.get()
    if draft is not None and draft.pending is session:
        draft.written, draft.pending = True, None


@event.listens_for(Session, "after_rollback")
def _not_written(session: Session) -> None:
    """A commit that failed (or a rollback) took the row with it: the next commit, or the middleware, writes it."""
    draft = _current.get()
    if draft is not None and draft.pending is session:
        draft.pending = None


@event.listens_for(Session, "before_flush")
def _stamp_creator(session: Session, _context, _instances) -> None:
    """Rows a request creates record who created it (`created_by_id`), which `own` rules check."""
    draft = _current.get()
    if draft is None or draft.user_id is None:
        return
    for obj in session.new:
        if hasattr(obj, "created_by_id") and obj.created_by_id is None:
            obj.created_by_id = draft.user_id
