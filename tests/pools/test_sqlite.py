"""The embedded default: the same imports into a SQLite database (executemany instead of COPY)."""

import json

import pytest

from tests.conftest import DATASETS, client_on
from tests.pools.conftest import upload


@pytest.fixture
def sqlite_client(app, tmp_path, monkeypatch):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'budgetlab.db'}", "BUDGETLAB_DATA_DIR": str(tmp_path)}
    with client_on(app, monkeypatch, env) as client:
        from backend.database import get_engine

        assert get_engine().dialect.name == "sqlite"
        yield client


def sqlite_counts() -> tuple[int, int]:
    from sqlalchemy import text

    from backend.database import get_engine

    with get_engine().connect() as connection:
        return (connection.execute(text("SELECT count(*) FROM pool")).scalar_one(),
                connection.execute(text("SELECT count(*) FROM prompt")).scalar_one())


def test_import_into_sqlite(sqlite_client):
    path = DATASETS / "gsm8k" / "test.jsonl"
    count = len(path.read_text().splitlines())
    response = upload(sqlite_client, path.name, path.read_bytes(), preset="gsm8k")
    assert response.status_code == 201, response.text
    pool = response.json()
    assert (pool["prompt_count"], pool["task_type"]) == (count, "numeric")
    assert sqlite_counts() == (1, count)
    page = sqlite_client.get(f"/api/pools/{pool['id']}/prompts", params={"limit": 2, "order": "-difficulty"}).json()
    assert page["total"] == count and page["items"][0]["gold"] == "18" and page["probe_id"] is None

    # A rejected upload leaves nothing, here too: the error comes after rows were already inserted.
    rows = "".join(json.dumps({"id": f"r{i % 9000}", "prompt": f"p{i}"}) + "\n" for i in range(9001))
    response = upload(sqlite_client, "dup.jsonl", rows.encode(), id_field="id")
    assert response.status_code == 422 and "line 1 and line 9001" in response.json()["detail"]
    assert sqlite_counts() == (1, count)

    demo = sqlite_client.post("/api/pools/demo").json()
    assert demo["prompt_count"] == 200 and sqlite_counts() == (2, count + 200)
    assert sqlite_client.delete(f"/api/pools/{pool['id']}").status_code == 204
    assert sqlite_counts() == (1, 200)  # cascaded to the prompts
