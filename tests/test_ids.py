"""Ids are never reused after a delete, on either database, and the score cache cannot serve a
deleted probe's data to a new one (issue 7 §2)."""

from sqlalchemy import text

from tests.conftest import upgrade_head
from tests.subsets.conftest import make_probed_pool

ID_TABLES = ("api_token", "job", "job_event", "pool", "prompt", "probe", "sample", "subset", "run", "experiment")


def _hard_pick(client, probe_id: int) -> list[int]:
    response = client.post("/api/selections/preview", json={
        "probe_id": probe_id, "strategy": "hard", "budget": {"kind": "count", "value": 10}})
    assert response.status_code == 200, response.text
    return [prompt["id"] for prompt in response.json()["prompts"]]


def test_create_preview_delete_create_preview_answers_for_the_new_probe(any_client):
    first = make_probed_pool(size=40, seed=0)
    assert set(_hard_pick(any_client, first.probe_id)) <= set(first.prompt_ids)
    assert any_client.delete(f"/api/pools/{first.pool_id}").status_code == 204

    second = make_probed_pool(size=40, seed=1)
    assert second.pool_id > first.pool_id and second.probe_id > first.probe_id and second.job_id > first.job_id
    assert min(second.prompt_ids) > max(first.prompt_ids)
    assert any_client.get(f"/api/probes/{first.probe_id}").status_code == 404
    picked = _hard_pick(any_client, second.probe_id)
    assert len(picked) == 10 and set(picked) <= set(second.prompt_ids)


def test_every_sqlite_table_with_an_id_is_autoincrement(tmp_path):
    from backend.tables import metadata

    url = f"sqlite:///{tmp_path / 'schema.db'}"
    upgrade_head(url)
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            ddl = dict(connection.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")).all())
    finally:
        engine.dispose()
    with_ids = {name for name, table in metadata.tables.items() if "id" in table.c and table.c.id.primary_key}
    assert set(ID_TABLES) <= with_ids
    assert {name for name in with_ids if "AUTOINCREMENT" not in ddl[name]} == set()


def test_score_cache_is_not_fooled_by_an_id_that_comes_back(client):
    """Even if an id came back (a restored dump, a manual insert), the cache key includes the probe's
    creation time, and a delete drops the entry."""
    from backend.database import session_scope

    first = make_probed_pool(size=40, seed=0)
    old_pick = _hard_pick(client, first.probe_id)
    assert client.delete(f"/api/pools/{first.pool_id}").status_code == 204
    with session_scope() as session:  # as after restoring an old dump: the sequence goes back
        session.execute(text(f"ALTER SEQUENCE probe_id_seq RESTART WITH {first.probe_id}"))
    second = make_probed_pool(size=40, seed=1)
    assert second.probe_id == first.probe_id
    new_pick = _hard_pick(client, second.probe_id)
    assert set(new_pick) <= set(second.prompt_ids) and not set(new_pick) & set(old_pick)
