"""The audit trail, for admins: filtered, paginated, and as CSV."""

import csv
import io
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel
from sqlmodel import select

from backend.audit.tables import AuditEvent
from backend.csv_cells import safe_row
from backend.database import SessionDep
from backend.params import INT32_MAX, Limit

router = APIRouter(tags=["audit"])
COLUMNS = ("id", "at", "user_id", "actor", "via", "operation", "kind", "target", "address", "outcome", "status")


class AuditRead(BaseModel):
    id: int
    at: datetime
    user_id: int | None
    actor: str
    via: str
    operation: str
    kind: str
    target: str | None
    address: str | None
    outcome: str
    status: int | None


UserFilter = Annotated[str | None, Query(max_length=64, description="The user's name")]
KindFilter = Annotated[str | None, Query(max_length=64, description="pool, probe, subset, run, experiment, job, "
                                                                    "session, token, user, label_set, ...")]
Since = Annotated[datetime | None, Query(description="From this time (inclusive, UTC)")]
Until = Annotated[datetime | None, Query(description="Before this time (UTC)")]
BeforeId = Annotated[int | None, Query(ge=1, le=INT32_MAX, description="Page on: events older than this id")]


def audit_query(user: UserFilter = None, kind: KindFilter = None, since: Since = None, until: Until = None,
                before_id: BeforeId = None):
    """The events the filters keep, newest first (the list and the CSV take the same filters)."""
    query = select(AuditEvent)
    if user is not None:
        query = query.where(AuditEvent.actor == user)
    if kind is not None:
        query = query.where(AuditEvent.kind == kind)
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    if until is not None:
        query = query.where(AuditEvent.at < until)
    if before_id is not None:
        query = query.where(AuditEvent.id < before_id)
    return query.order_by(AuditEvent.id.desc())


AuditQuery = Annotated[Any, Depends(audit_query)]


@router.get("/audit")
def list_audit(session: SessionDep, query: AuditQuery, limit: Limit = 100) -> list[AuditRead]:
    """Newest first; page on with before_id = the last id of a page."""
    return list(session.exec(query.limit(limit)))


@router.get("/audit.csv", response_class=Response,
            responses={200: {"content": {"text/csv": {}}, "description": "The filtered events as CSV"}})
def audit_csv(session: SessionDep, query: AuditQuery,
              limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000) -> Response:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for event in session.exec(query.limit(limit)):
        writer.writerow(safe_row([getattr(event, c) for c in COLUMNS]))
    return Response(buffer.getvalue(), media_type="text/csv",
                    headers={"Content-Disposition": 'attachment; filename="audit.csv"'})
