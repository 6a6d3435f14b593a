"""The audit trail: a row per state-changing request and sign-in, written with the change, filtered, paginated
and exported as CSV that a spreadsheet will not execute."""

import csv
import io
from contextlib import nullcontext

import pytest
from sqlmodel import select

from tests.auth.conftest import PASSWORD, bearer
from tests.conftest import ADMIN_TOKEN


def events(client, **filters) -> list[dict]:
    answer = client.get("/api/audit", params=filters, headers=bearer(ADMIN_TOKEN))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_changes_refusals_failures_and_sign_ins_are_recorded(client, make_user):
    viewer, viewer_token = make_user("viewer")
    manager, manager_token = make_user("manager")
    created = client.post("/api/pools/demo", json={}, headers=bearer(manager_token))
    assert created.status_code == 201
    refused = client.post("/api/pools/demo", json={}, headers=bearer(viewer_token))
    assert refused.status_code == 403
    failed = client.post("/api/pools/demo", json={"held_out": "maybe"}, headers=bearer(manager_token))
    assert failed.status_code == 422

    mine = events(client, user=manager["name"])
    by_operation = [(e["operation"], e["outcome"], e["status"], e["target"]) for e in mine]
    assert ("POST /api/pools/demo", "succeeded", None, f"pool {created.json()['id']}") in by_operation
    assert ("POST /api/pools/demo", "failed", 422, None) in by_operation
    assert ("POST /api/session", "succeeded", None, None) in by_operation  # make_user signed in
    assert all(e["address"] == "testclient" and e["kind"] in ("pool", "session", "token") for e in mine)
    theirs = events(client, user=viewer["name"], kind="pool")
    assert [(e["outcome"], e["status"]) for e in theirs] == [("refused", 403)]
    bad = client.post("/api/session", json={"name": manager["name"], "password": "wrong password"},
                      headers={"Authorization": ""})
    assert bad.status_code == 401
    assert events(client, kind="session", limit=1)[0]["outcome"] == "refused"


def test_the_row_is_written_in_the_same_transaction_as_the_change(service_env):
    """Rolled back with the change, committed with it."""
    from backend.audit import trail
    from backend.audit.tables import AuditEvent
    from backend.database import session_scope
    from backend.pools.tables import Pool

    marker = "same-transaction-check"
    for commit in (False, True):
        draft = trail.Draft(operation=f"POST {marker} {commit}", kind="pool", address="here")
        token = trail.open_draft(draft)
        try:
            with pytest.raises(RuntimeError) if not commit else nullcontext():
                with session_scope() as session:
                    session.add(Pool(name=marker, task_type="numeric", has_answers=True))
                    session.flush()
                    if not commit:
                        raise RuntimeError("the change fails after its rows were flushed")
        finally:
            trail.close_draft(token)
        with session_scope(immediate=False) as session:
            rows = session.exec(select(AuditEvent).where(AuditEvent.operation == draft.operation)).all()
            pools = session.exec(select(Pool).where(Pool.name == marker)).all()
        assert len(rows) == int(commit) and len(pools) == int(commit)
        if commit:
            assert rows[0].target == f"pool {pools[0].id}" and rows[0].outcome == "succeeded"
            assert draft.written


def test_filters_pages_and_a_csv_a_spreadsheet_will_not_run(client):
    formula = "=HYPERLINK(\"http://evil\")"
    created = client.post("/api/users", json={"name": formula, "role": "viewer", "password": PASSWORD},
                          headers=bearer(ADMIN_TOKEN))
    assert created.status_code == 201
    assert client.post("/api/session", json={"name": formula, "password": PASSWORD},
                       headers={"Authorization": ""}).status_code == 200
    client.cookies.clear()
    first = events(client, limit=2)
    second = events(client, limit=2, before_id=first[-1]["id"])
    assert len(first) == 2 and all(e["id"] < first[-1]["id"] for e in second)
    since = first[0]["at"]
    assert all(e["at"] >= since[:19] for e in events(client, since=since))
    exported = client.get("/api/audit.csv", params={"user": formula}, headers=bearer(ADMIN_TOKEN))
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert rows and all(row["actor"] == "'" + formula for row in rows)
    assert client.get("/api/audit", params={"limit": 501}, headers=bearer(ADMIN_TOKEN)).status_code == 422


@pytest.mark.parametrize("statement", ["UPDATE audit_event SET outcome = 'succeeded'", "DELETE FROM audit_event"])
def test_the_database_refuses_to_change_or_delete_audit_rows(any_client, statement):
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from backend.database import get_engine

    assert any_client.post("/api/pools/demo", json={}).status_code == 201  # at least one row
    with pytest.raises(DBAPIError, match="append-only"), get_engine().begin() as connection:
        connection.execute(text(statement))
    assert any_client.get("/api/audit").json()
