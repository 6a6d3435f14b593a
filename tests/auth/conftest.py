import uuid

import pytest

from tests.conftest import ADMIN_TOKEN

PASSWORD = "correct horse battery"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def make_user(client):
    """Create a user with a role through the API (as admin); returns (user, token) with a token of that role."""
    def make(role: str, password: str | None = PASSWORD) -> tuple[dict, str]:
        name = f"{role}-{uuid.uuid4().hex[:8]}"
        user = client.post("/api/users", json={"name": name, "role": role, "password": password},
                           headers=bearer(ADMIN_TOKEN))
        assert user.status_code == 201, user.text
        signed_in = client.post("/api/session", json={"name": name, "password": password},
                                headers={"Authorization": ""})
        assert signed_in.status_code == 200, signed_in.text
        cookie, csrf = client.cookies.get("budgetlab_session"), signed_in.json()["csrf_token"]
        client.cookies.clear()
        token = client.post("/api/tokens", json={"name": "test"},
                            headers={"Authorization": "", "X-CSRF-Token": csrf},
                            cookies={"budgetlab_session": cookie})
        assert token.status_code == 201, token.text
        return user.json(), token.json()["token"]

    return make
