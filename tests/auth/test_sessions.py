"""Browser sign-in: an HttpOnly, SameSite=Strict cookie, a CSRF token on every change, sign-out on the server;
one message for every bad credential; failures limited per address; tokens listed, revoked and expiring."""

from datetime import UTC, datetime, timedelta

from backend.auth.middleware import INVALID
from tests.auth.conftest import PASSWORD, bearer
from tests.conftest import ADMIN_TOKEN, app_with

ANONYMOUS = {"Authorization": ""}


def sign_in(client, name: str, password: str = PASSWORD):
    return client.post("/api/session", json={"name": name, "password": password}, headers=ANONYMOUS)


def test_sign_in_sets_a_strict_httponly_cookie_and_changes_need_the_csrf_token(client, make_user):
    user, _ = make_user("manager")
    client.cookies.clear()
    answer = sign_in(client, user["name"])
    assert answer.status_code == 200 and answer.json()["role"] == "manager"
    cookie_header = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie_header and "SameSite=strict" in cookie_header and "Path=/" in cookie_header
    csrf = answer.json()["csrf_token"]
    me = client.get("/api/session", headers=ANONYMOUS)
    assert me.status_code == 200 and me.json()["name"] == user["name"] and me.json()["via"] == "session"
    assert me.json()["signed_in"] and me.json()["csrf_token"] == answer.json()["csrf_token"]
    no_csrf = client.post("/api/tokens", json={"name": "x"}, headers=ANONYMOUS)
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.json()["detail"]
    wrong_csrf = client.post("/api/tokens", json={"name": "x"}, headers={**ANONYMOUS, "X-CSRF-Token": "guess"})
    assert wrong_csrf.status_code == 403
    made = client.post("/api/tokens", json={"name": "x"}, headers={**ANONYMOUS, "X-CSRF-Token": csrf})
    assert made.status_code == 201, made.text
    # Signing out ends the session on the server: the old cookie no longer works even if replayed.
    old_cookie = client.cookies.get("budgetlab_session")
    assert client.delete("/api/session", headers={**ANONYMOUS, "X-CSRF-Token": csrf}).status_code == 204
    client.cookies.clear()
    replayed = client.get("/api/tokens", headers=ANONYMOUS, cookies={"budgetlab_session": old_cookie})
    assert replayed.status_code == 401 and replayed.json()["detail"] == INVALID
    client.cookies.clear()
    # Asking who one is never fails: the sign-in page asks it first.
    anonymous = client.get("/api/session", headers=ANONYMOUS, cookies={"budgetlab_session": old_cookie})
    assert anonymous.status_code == 200 and anonymous.json()["signed_in"] is False
    client.cookies.clear()


def test_a_bad_sign_in_never_says_which_part_was_wrong(client, make_user):
    user, _ = make_user("viewer")
    wrong_password = sign_in(client, user["name"], "not the password")
    no_such_user = sign_in(client, "nobody-" + user["name"], PASSWORD)
    assert wrong_password.status_code == no_such_user.status_code == 401
    assert wrong_password.json()["detail"] == no_such_user.json()["detail"]
    unknown = client.get("/api/pools", headers=bearer("bl_unknown"))
    assert unknown.status_code == 401 and unknown.json()["detail"] == INVALID
    client.cookies.clear()


def test_a_disabled_user_is_signed_out_and_their_tokens_stop(client, make_user):
    user, token = make_user("manager")
    assert client.get("/api/tokens", headers=bearer(token)).status_code == 200
    disabled = client.patch(f"/api/users/{user['id']}", json={"disabled": True}, headers=bearer(ADMIN_TOKEN))
    assert disabled.status_code == 200 and disabled.json()["disabled"] is True
    assert client.get("/api/tokens", headers=bearer(token)).status_code == 401
    assert sign_in(client, user["name"]).status_code == 401


def test_the_last_active_admin_stays_and_no_one_locks_themselves_out(client, db_session):
    import pytest
    from sqlmodel import select

    from backend.auth.service import AuthError, create_user, update_user
    from backend.auth.tables import User

    solo = create_user(db_session, "solo-admin", "admin")
    for other in db_session.exec(select(User).where(User.role == "admin", User.id != solo.id)):
        update_user(db_session, other, disabled=True)
    for change in ({"role": "viewer"}, {"disabled": True}):
        with pytest.raises(AuthError, match="last active admin"):
            update_user(db_session, solo, **change)
    db_session.rollback()
    # Through the API: not one's own role or account, and not the token the request is made with.
    me = client.get("/api/session", headers=bearer(ADMIN_TOKEN)).json()
    for change in ({"role": "viewer"}, {"disabled": True}):
        answer = client.patch(f"/api/users/{me['user_id']}", json=change, headers=bearer(ADMIN_TOKEN))
        assert answer.status_code == 409 and "another admin" in answer.json()["detail"]
    mine = next(t for t in client.get("/api/tokens", headers=bearer(ADMIN_TOKEN)).json()
                if t["name"] == "admin (BUDGETLAB_ADMIN_TOKEN)")
    answer = client.delete(f"/api/tokens/{mine['id']}", headers=bearer(ADMIN_TOKEN))
    assert answer.status_code == 409 and "locked out" in answer.json()["detail"]


def test_tokens_are_listed_revoked_and_expire(client, make_user):
    user, token = make_user("manager")
    soon = datetime.now(UTC) + timedelta(seconds=2)
    made = client.post("/api/tokens", json={"name": "short", "expires_at": soon.isoformat()}, headers=bearer(token))
    assert made.status_code == 201, made.text
    listed = client.get("/api/tokens", headers=bearer(token)).json()
    assert {t["name"] for t in listed} == {"test", "short"} and all("token" not in t for t in listed)
    assert all(t["user"] == user["name"] for t in listed)
    used = next(t for t in listed if t["name"] == "test")
    assert used["last_used_at"] is not None  # this very request used it
    assert client.get("/api/tokens?all_users=true", headers=bearer(token)).status_code == 403
    everyone = client.get("/api/tokens?all_users=true", headers=bearer(ADMIN_TOKEN)).json()
    assert {t["user"] for t in everyone} >= {user["name"], "admin"}
    # Expiry
    short = made.json()["token"]
    assert client.get("/api/tokens", headers=bearer(short)).status_code == 200
    import time

    time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 0.2)
    assert client.get("/api/tokens", headers=bearer(short)).status_code == 401
    past = client.post("/api/tokens", json={"name": "past", "expires_at": "2020-01-01T00:00:00Z"},
                       headers=bearer(token))
    assert past.status_code == 422 and "future" in past.json()["detail"]
    # Revocation stops it at once, and is listed.
    other = client.post("/api/tokens", json={"name": "revoke me"}, headers=bearer(token)).json()
    assert client.delete(f"/api/tokens/{other['id']}", headers=bearer(token)).status_code == 204
    assert client.get("/api/tokens", headers=bearer(other["token"])).status_code == 401
    revoked = next(t for t in client.get("/api/tokens", headers=bearer(token)).json() if t["id"] == other["id"])
    assert revoked["revoked_at"] is not None


def test_bad_credentials_are_limited_per_address(service_env):
    from fastapi.testclient import TestClient

    with TestClient(app_with(BUDGETLAB_AUTH_FAILURES_ALLOWED="3")) as client:
        for _ in range(3):
            assert client.get("/api/pools", headers=bearer("bl_wrong")).status_code == 401
        blocked = client.get("/api/pools", headers=bearer(ADMIN_TOKEN))  # even a good token, from this address
        assert blocked.status_code == 429 and int(blocked.headers["Retry-After"]) > 0
        assert "try again in" in blocked.json()["detail"]
        signing_in = sign_in(client, "admin", "whatever")
        assert signing_in.status_code == 429
        other = client.get("/api/pools", headers=bearer(ADMIN_TOKEN) | {"X-Forwarded-For": "10.0.0.9"})
        assert other.status_code == 429  # a header the client sets does not change its address


def test_a_naive_expiry_is_utc_and_a_stale_cookie_is_dropped(client, make_user):
    _, token = make_user("viewer")
    made = client.post("/api/tokens", json={"name": "naive", "expires_at": "2099-01-01T00:00:00"},
                       headers=bearer(token))
    assert made.status_code == 201 and made.json()["expires_at"].startswith("2099-01-01T00:00:00")
    client.cookies.clear()
    stale = client.get("/api/tokens", headers=ANONYMOUS, cookies={"budgetlab_session": "ended-long-ago"})
    assert stale.status_code == 401 and "budgetlab_session=;" in stale.headers["set-cookie"]
    assert "Max-Age=0" in stale.headers["set-cookie"]
    client.cookies.clear()


def test_signing_in_again_ends_the_browsers_earlier_session(client, make_user):
    user, _ = make_user("viewer")
    client.cookies.clear()
    assert sign_in(client, user["name"]).status_code == 200
    first = client.cookies.get("budgetlab_session")
    assert sign_in(client, user["name"]).status_code == 200
    second = client.cookies.get("budgetlab_session")
    assert first != second
    client.cookies.clear()
    assert client.get("/api/tokens", headers=ANONYMOUS, cookies={"budgetlab_session": first}).status_code == 401
    client.cookies.clear()
    assert client.get("/api/tokens", headers=ANONYMOUS, cookies={"budgetlab_session": second}).status_code == 200
    client.cookies.clear()


def test_a_first_admin_without_a_password_gets_one(db_session):
    """Deployments upgraded by migration 0012 have an admin with tokens only; BUDGETLAB_ADMIN_PASSWORD sets it."""
    from sqlmodel import select

    from backend.auth.service import ensure_first_admin
    from backend.auth.service import sign_in as check
    from backend.auth.tables import User

    admin = db_session.exec(select(User).where(User.role == "admin").order_by(User.id)).first()
    admin.password_hash = None
    db_session.add(admin)
    db_session.flush()
    assert ensure_first_admin(db_session, None, "a configured password") == {}
    assert check(db_session, admin.name, "a configured password") is not None
    assert ensure_first_admin(db_session, None, "another password") == {}  # a set password is kept
    assert check(db_session, admin.name, "another password") is None
    # Without one configured, one is generated and printed once.
    admin.password_hash = None
    db_session.add(admin)
    db_session.flush()
    printed = ensure_first_admin(db_session, None, None)
    assert set(printed) == {"password"} and check(db_session, admin.name, printed["password"]) is not None
    assert ensure_first_admin(db_session, None, None) == {}
