"""Response headers on every answer, and the API's description behind sign-in outside development."""

import pytest

from tests.auth.conftest import bearer
from tests.conftest import ADMIN_TOKEN, app_with

ANONYMOUS = {"Authorization": ""}


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/api/health", "/api/pools", "/openapi.json"])
def test_every_response_carries_the_security_headers(client, path):
    answer = client.get(path, headers=ANONYMOUS)
    assert answer.status_code in (200, 401)
    policy = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    if path != "/openapi.json":
        assert "script-src 'self'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"


def test_docs_need_a_sign_in_outside_development(service_env):
    from fastapi.testclient import TestClient

    with TestClient(app_with(BUDGETLAB_ENV="production")) as client:
        for path in ("/docs", "/openapi.json", "/redoc"):
            assert client.get(path, headers=ANONYMOUS).status_code == 401, path
            assert client.get(path, headers=bearer(ADMIN_TOKEN)).status_code == 200, path
        assert client.get("/api/health", headers=ANONYMOUS).status_code == 200
        assert client.get("/", headers=ANONYMOUS).status_code == 200  # the page itself, to sign in
