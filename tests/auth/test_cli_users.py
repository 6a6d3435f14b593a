"""`budgetlab user add|passwd|list` and `budgetlab token create --user --role --days`, against the real database."""

import uuid

from typer.testing import CliRunner

from backend.cli import app as cli
from tests.auth.conftest import bearer


def test_users_and_their_tokens_from_the_command_line(client):
    runner = CliRunner()
    name = f"cli-{uuid.uuid4().hex[:6]}"
    added = runner.invoke(cli, ["user", "add", name, "--role", "manager", "--password", "a long password"])
    assert added.exit_code == 0 and f"{name} (manager)" in added.output, added.output
    again = runner.invoke(cli, ["user", "add", name, "--password", "a long password"])
    assert again.exit_code == 1 and "exists already" in again.output
    short = runner.invoke(cli, ["user", "passwd", name, "--password", "short"])
    assert short.exit_code == 1 and "at least 10 characters" in short.output
    assert runner.invoke(cli, ["user", "passwd", name, "--password", "another long one"]).exit_code == 0
    assert name in runner.invoke(cli, ["user", "list"]).output

    made = runner.invoke(cli, ["token", "create", "--user", name, "--role", "viewer", "--days", "1", "--name", "ro"])
    assert made.exit_code == 0, made.output
    token = made.output.strip().splitlines()[-1]
    assert client.get("/api/pools", headers=bearer(token)).status_code == 200
    assert client.post("/api/pools/demo", json={}, headers=bearer(token)).status_code == 403
    listed = client.get("/api/tokens", headers=bearer(token)).json()
    assert [(t["name"], t["role"], t["expires_at"] is not None) for t in listed] == [("ro", "viewer", True)]
    wider = runner.invoke(cli, ["token", "create", "--user", name, "--role", "admin"])
    assert wider.exit_code == 1 and "more rights than its user" in wider.output
    nobody = runner.invoke(cli, ["token", "create", "--user", "nobody-" + name])
    assert nobody.exit_code == 1 and "No user named" in nobody.output
    signed_in = client.post("/api/session", json={"name": name, "password": "another long one"},
                            headers={"Authorization": ""})
    assert signed_in.status_code == 200
    client.cookies.clear()
