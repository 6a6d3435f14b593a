"""Signing in as each role in chromium: what each sees and can do, what the server refuses and why, the admin
page (users, tokens, audit log), and sign-out ending the session on the server."""

import uuid

import pytest

from tests.conftest import ADMIN_TOKEN
from tests.frontend.conftest import api_get, needs_chromium, sign_in

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Page, expect

pytestmark = needs_chromium
PASSWORD = "a browser password"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def add_user(page: Page, server: str, role: str) -> str:
    name = f"{role}-{uuid.uuid4().hex[:6]}"
    made = page.request.post(f"{server}/api/users", headers=ADMIN, data={"name": name, "role": role,
                                                                          "password": PASSWORD})
    assert made.status == 201, made.text()
    return name


def refused_problems(page: Page) -> list[str]:
    # Chromium logs each refused fetch as a console error; those the test provokes are expected.
    return [p for p in page.problems if "403" not in p and "401" not in p]


def test_a_viewer_reads_but_sees_no_actions_and_is_told_why_when_refused(page: Page, server: str) -> None:
    admins_pool = page.request.post(f"{server}/api/pools/demo", headers=ADMIN, data={}).json()
    name = add_user(page, server, "viewer")
    sign_in(page, server, name, PASSWORD)
    expect(page.locator("#auth-state")).to_have_text(f"{name} · viewer")
    expect(page.locator(f"[data-testid=pool-link-{admins_pool['id']}]")).to_be_visible()  # reads everything
    for hidden in ("#demo-button", "#upload-form", f"[data-testid=delete-pool-{admins_pool['id']}]", "#nav-admin"):
        expect(page.locator(hidden)).to_be_hidden()
    page.click(f"[data-testid=pool-link-{admins_pool['id']}]")
    expect(page.locator("#pool-name")).to_have_text(admins_pool["name"])
    for hidden in ("#probe-form", "[data-testid=labels-import-box]", "#labels-cost-save"):
        expect(page.locator(hidden)).to_have_count(1)  # on the page, for a manager to use
        expect(page.locator(hidden)).to_be_hidden()
    # A refused request (here sent by hand, as a script in the page would) is answered with the reason.
    status = page.evaluate("""async () => {
        const me = await (await fetch('/api/session')).json();
        const r = await fetch('/api/pools/demo', {method: 'POST', headers: {'X-CSRF-Token': me.csrf_token}});
        return [r.status, (await r.json()).detail];
    }""")
    assert status[0] == 403 and "needs the manager role" in status[1]
    page.goto(f"{server}/#/admin")
    expect(page.locator("#error-text")).to_contain_text("needs the admin role")
    # A viewer still manages their own (viewer) tokens.
    page.goto(f"{server}/#/tokens")
    page.fill("#token-name", "dashboard script")
    page.click("#token-create")
    expect(page.locator("[data-testid=token-secret]")).to_contain_text("bl_")
    assert refused_problems(page) == []


def test_a_manager_creates_and_deletes_their_own_pool_but_not_another_users(page: Page, server: str) -> None:
    admins_pool = page.request.post(f"{server}/api/pools/demo", headers=ADMIN, data={}).json()
    name = add_user(page, server, "manager")
    sign_in(page, server, name, PASSWORD)
    expect(page.locator("#nav-admin")).to_be_hidden()
    with page.expect_response(lambda r: r.url.endswith("/api/pools/demo") and r.request.method == "POST") as made:
        page.click("#demo-button")
    pool = made.value.json()
    assert made.value.status == 201 and pool["created_by"] == name
    expect(page.locator(f"[data-pool-id='{pool['id']}']")).to_contain_text(name)
    expect(page.locator(f"[data-testid=delete-pool-{admins_pool['id']}]")).to_be_hidden()
    page.click(f"[data-testid=delete-pool-{pool['id']}]")
    expect(page.locator(f"[data-testid=pool-link-{pool['id']}]")).to_be_hidden()
    assert all(p["id"] != pool["id"] for p in api_get(page, server, "/api/pools"))
    assert refused_problems(page) == []


def test_an_admin_adds_a_user_reads_the_audit_log_and_signing_out_ends_the_session(page: Page, server: str) -> None:
    sign_in(page, server)
    # The session cookie is HttpOnly: page scripts cannot read it, and nothing is kept in storage.
    assert "budgetlab_session" not in page.evaluate("document.cookie")
    assert page.evaluate("localStorage.length") == 0
    page.click("#nav-admin")
    new_name = f"added-{uuid.uuid4().hex[:6]}"
    page.fill("#new-user-name", new_name)
    page.select_option("#new-user-role", "manager")
    page.fill("#new-user-password", PASSWORD)
    page.click("#add-user")
    expect(page.locator(f"[data-testid=user-row-{new_name}]")).to_contain_text("active")
    page.fill("#audit-user", "admin")
    page.click("text=Filter")
    expect(page.locator("[data-testid=audit-table]")).to_contain_text("POST /api/users")
    expect(page.locator("[data-testid=audit-table]")).to_contain_text("POST /api/session")
    cookie = next(c["value"] for c in page.context.cookies() if c["name"] == "budgetlab_session")
    page.click("#signout-button")
    page.wait_for_url("**/#/signin")
    replayed = page.request.get(f"{server}/api/tokens", headers={"Cookie": f"budgetlab_session={cookie}"})
    assert replayed.status == 401
    assert refused_problems(page) == []
