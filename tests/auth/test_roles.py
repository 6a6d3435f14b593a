"""Every operation in /openapi.json, with each role, answers as the one table in backend/auth/access.py says."""

import re

import pytest

from backend.auth.access import ACCESS, PUBLIC
from backend.auth.roles import ROLES, allows
from tests.auth.conftest import bearer
from tests.conftest import ADMIN_TOKEN

NO_SUCH_ID = "2000000000"  # a valid id no row has: an allowed call is then answered 404 or 422, never carried out


def operations(client) -> list[tuple[str, str]]:
    spec = client.get("/openapi.json").json()
    return [(method.upper(), path) for path, methods in spec["paths"].items() for method in methods
            if path.startswith("/api/")]


def call(client, method: str, path: str, headers: dict):
    """Call an operation with ids no row has and an unknown query parameter: once authorised, every operation
    refuses such input (422 or 404) instead of acting, so the walk changes nothing."""
    url = re.sub(r"\{[^}]+\}", NO_SUCH_ID, path) + "?not_a_parameter=1"
    return client.request(method, url, headers=headers)


def latest_audit_id(client) -> int:
    events = client.get("/api/audit?limit=1", headers=bearer(ADMIN_TOKEN)).json()
    return events[0]["id"] if events else 0


def test_the_table_covers_every_operation_and_the_document_states_each_role(client):
    ops = operations(client)
    assert set(ops) == set(ACCESS)
    spec = client.get("/openapi.json").json()
    for method, path in ops:
        assert spec["paths"][path][method.lower()]["x-required-role"] == ACCESS[(method, path)].role


def test_every_operation_with_every_role_answers_as_the_table_says(client, make_user):
    tokens = {"admin": ADMIN_TOKEN} | {role: make_user(role)[1] for role in ROLES if role != "admin"}
    walked = 0
    for method, path in operations(client):
        rule = ACCESS[(method, path)]
        anonymous = call(client, method, path, {"Authorization": ""})
        if rule.role == PUBLIC:
            assert anonymous.status_code not in (401, 403), (method, path, anonymous.text)
            continue
        assert anonymous.status_code == 401, (method, path, anonymous.status_code)
        for role, token in tokens.items():
            last = latest_audit_id(client)
            answer = call(client, method, path, bearer(token))
            written = client.get("/api/audit?limit=5", headers=bearer(ADMIN_TOKEN)).json()
            new = [event for event in written if event["id"] > last]
            # One audit row for each state-changing request (refused ones too), none for reads.
            assert [e["operation"] for e in new] == ([f"{method} {path}"] if rule.changes else []), \
                (role, method, path, new)
            refused = not allows(role, rule.role)
            assert (answer.status_code == 403) == refused, (role, method, path, answer.status_code, answer.text)
            assert answer.status_code not in (200, 201, 202, 204) or method == "GET" or not rule.changes, \
                (role, method, path, "carried out")
            if refused:
                assert f"needs the {rule.role} role" in answer.json()["detail"]
            walked += 1
    assert walked >= 3 * 55


def test_a_token_narrower_than_its_user_acts_with_the_narrower_role(client, make_user):
    user, manager_token = make_user("manager")
    narrowed = client.post("/api/tokens", json={"name": "read-only", "role": "viewer"},
                           headers=bearer(manager_token))
    assert narrowed.status_code == 201 and narrowed.json()["role"] == "viewer"
    refused = client.post("/api/pools/demo", headers=bearer(narrowed.json()["token"]))
    assert refused.status_code == 403 and "token is narrower" in refused.json()["detail"]
    wider = client.post("/api/tokens", json={"name": "up", "role": "admin"}, headers=bearer(manager_token))
    assert wider.status_code == 422 and "narrower" in wider.json()["detail"]


@pytest.mark.parametrize("kind", ["pool", "token"])
def test_managers_delete_only_what_they_created_and_admins_anything(client, make_user, kind):
    _, alice = make_user("manager")
    _, bob = make_user("manager")
    if kind == "pool":
        created = client.post("/api/pools/demo", json={},
                               headers=bearer(alice))
        assert created.status_code == 201, created.text
        path = f"/api/pools/{created.json()['id']}"
    else:
        created = client.post("/api/tokens", json={"name": "alice's script"}, headers=bearer(alice))
        assert created.status_code == 201, created.text
        path = f"/api/tokens/{created.json()['id']}"
    refused = client.delete(path, headers=bearer(bob))
    assert refused.status_code == 403, refused.text
    assert "Only the user who created this" in refused.json()["detail"]
    owner = ADMIN_TOKEN if kind == "token" else alice  # an admin may delete anyone's; the owner their own
    assert client.delete(path, headers=bearer(owner)).status_code == 204


@pytest.mark.parametrize("spelling", ["{id}.0", "{id}%2E0", "0{id}", "+{id}"])
def test_an_id_spelt_otherwise_never_skips_the_creator_check(client, make_user, spelling):
    """FastAPI reads "5.0" as 5: the creator check must not let such a spelling through."""
    _, alice = make_user("manager")
    _, bob = make_user("manager")
    pool = client.post("/api/pools/demo", json={}, headers=bearer(alice)).json()
    path = "/api/pools/" + spelling.format(id=pool["id"])
    answer = client.delete(path, headers=bearer(bob))
    assert answer.status_code in (403, 404, 422), (path, answer.status_code)
    assert client.get(f"/api/pools/{pool['id']}").status_code == 200  # still there


def test_a_root_path_does_not_route_around_the_checks(app):
    from fastapi.testclient import TestClient

    with TestClient(app, root_path="/prefix") as prefixed:
        anonymous = prefixed.post("/prefix/api/users", json={"name": "intruder", "role": "admin",
                                                             "password": "0123456789"})
        assert anonymous.status_code == 401
        assert prefixed.get("/prefix/api/pools", headers=bearer(ADMIN_TOKEN)).status_code == 200
