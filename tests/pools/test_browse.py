"""The demo pool, listing, getting, deleting, and prompt pages with scores and difficulty order."""

import re

import pytest
from sqlalchemy import text

from backend.pools.demo import FAMILIES, demo_problems, held_out_problems, problem_key


@pytest.fixture
def demo_pool(client) -> dict:
    response = client.post("/api/pools/demo")
    assert response.status_code == 201, response.text
    return response.json()


def add_probe(pool_id: int, status: str, difficulties: dict[int, float]) -> int:
    """A probe of the pool with a job in `status` and scores for the prompts at the given positions."""
    from sqlmodel import select

    from backend.database import session_scope
    from backend.jobs.tables import Job
    from backend.pools.tables import Pool, Prompt
    from backend.probes.tables import Probe, PromptScore

    with session_scope() as session:
        job = Job(kind="probe", status=status)
        session.add(job)
        session.flush()
        # a probe of the whole pool (only some of its prompts scored yet)
        probe = Probe(pool_id=pool_id, job_id=job.id, model="m", k=4, temperature=1.0, max_new_tokens=64, seed=0,
                      label_free=False, shard_size=256, prompt_count=session.get(Pool, pool_id).prompt_count)
        session.add(probe)
        session.flush()
        prompts = {p.position: p.id for p in session.exec(select(Prompt).where(Prompt.pool_id == pool_id))}
        for position, difficulty in difficulties.items():
            correct = round((1 - difficulty) * 4)
            session.add(PromptScore(probe_id=probe.id, prompt_id=prompts[position], k=4, correct_count=correct,
                                    pass_rate=correct / 4, wilson_low=0.0, wilson_high=1.0, agreement=0.5,
                                    majority_answer="7", base_wrong=difficulty > 0.5, difficulty=difficulty))
        return probe.id


def test_demo_pool(client, demo_pool):
    assert demo_pool["name"].startswith("Demo")
    assert (demo_pool["prompt_count"], demo_pool["task_type"], demo_pool["has_answers"]) == (200, "numeric", True)
    assert demo_pool["source_format"] == "generated"
    page = client.get(f"/api/pools/{demo_pool['id']}/prompts", params={"limit": 200}).json()
    expected = demo_problems()
    assert [(p["external_id"], p["text"], p["answer"]) for p in page["items"]] == \
        [(e.external_id, e.text, e.answer) for e in expected]
    assert all(p["gold"] == p["answer"] for p in page["items"])
    families = {p["external_id"].split("-")[1] for p in page["items"]}
    assert families == set(FAMILIES)


def test_demo_problems_are_deterministic_spread_over_families_and_held_out_apart():
    first, again = demo_problems(), demo_problems()
    assert first == again and len(first) == 200
    assert demo_problems(seed=1) != first
    by_family = {name: [p for p in first if p.family == name] for name in FAMILIES}
    assert sorted(len(problems) for problems in by_family.values()) == [22] * 7 + [23] * 2
    keys = {problem_key(p.family, p.text) for p in first}  # none the same up to the order of its numbers
    assert len(keys) == 200 and all(int(p.answer) >= 0 for p in first)
    # Answers are right: spot-check one family per kind of question.
    for p in by_family["copy"] + by_family["add"] + by_family["next"]:
        numbers = [int(n) for n in re.findall(r"\d+", p.text)]
        assert int(p.answer) == {"copy": numbers[0], "add": sum(numbers), "next": numbers[0] + 1}[p.family]
    held_out = held_out_problems()
    assert len(held_out) == 180 and not {problem_key(p.family, p.text) for p in held_out} & keys
    assert problem_key("add", "What is 3 + 5?") == problem_key("add", "What is 5 + 3?")
    assert len(demo_problems(count=7)) == 7
    with pytest.raises(ValueError, match="too few distinct"):
        demo_problems(count=9 * 200)  # counting words has about 60 distinct problems


def test_list_get_and_delete(client, demo_pool, stored):
    listing = client.get("/api/pools").json()
    assert listing[0]["id"] == demo_pool["id"]  # newest first
    assert client.get(f"/api/pools/{demo_pool['id']}").json() == demo_pool
    add_probe(demo_pool["id"], "succeeded", {0: 0.5, 1: 0.25})
    pools, prompts = stored()
    assert client.delete(f"/api/pools/{demo_pool['id']}").status_code == 204
    assert stored() == (pools - 1, prompts - 200)
    missing = client.get(f"/api/pools/{demo_pool['id']}")
    assert missing.status_code == 404 and "GET /api/pools" in missing.json()["detail"]
    assert client.delete(f"/api/pools/{demo_pool['id']}").status_code == 404
    assert client.get(f"/api/pools/{demo_pool['id']}/prompts").status_code == 404
    from backend.database import get_engine

    with get_engine().connect() as connection:
        left = connection.execute(text("SELECT count(*) FROM probe WHERE pool_id = :p"), {"p": demo_pool["id"]})
        assert left.scalar_one() == 0


def test_delete_refused_while_probing(client, demo_pool):
    add_probe(demo_pool["id"], "running", {0: 0.5})
    response = client.delete(f"/api/pools/{demo_pool['id']}")
    assert response.status_code == 409 and "cancel" in response.json()["detail"]
    assert client.get(f"/api/pools/{demo_pool['id']}").status_code == 200


def test_prompt_pages(client, demo_pool):
    url = f"/api/pools/{demo_pool['id']}/prompts"
    page = client.get(url, params={"limit": 10, "offset": 0}).json()
    assert (page["total"], page["limit"], page["offset"], page["order"], page["probe_id"]) == \
        (200, 10, 0, "position", None)
    assert [p["position"] for p in page["items"]] == list(range(10))
    tail = client.get(url, params={"limit": 10, "offset": 195}).json()
    assert [p["position"] for p in tail["items"]] == list(range(195, 200))
    assert client.get(url, params={"limit": 0}).status_code == 422
    assert client.get(url, params={"order": "random"}).status_code == 422
    # Without a probe, difficulty order falls back to file order with null scores.
    unscored = client.get(url, params={"order": "difficulty", "limit": 3}).json()
    assert unscored["probe_id"] is None and [p["position"] for p in unscored["items"]] == [0, 1, 2]


def test_prompts_ordered_by_difficulty(client, demo_pool):
    pool_id = demo_pool["id"]
    url = f"/api/pools/{pool_id}/prompts"
    scored = add_probe(pool_id, "succeeded", {0: 0.75, 1: 0.0, 2: 1.0, 3: 0.25, 4: 0.75})
    add_probe(pool_id, "running", {0: 0.0})  # newer, but not finished: not the default
    page = client.get(url, params={"order": "difficulty", "limit": 6}).json()
    assert page["probe_id"] == scored
    assert [(p["position"], p["difficulty"]) for p in page["items"]] == \
        [(1, 0.0), (3, 0.25), (0, 0.75), (4, 0.75), (2, 1.0), (5, None)]
    first = page["items"][0]
    assert (first["pass_rate"], first["k"], first["correct_count"], first["base_wrong"]) == (1.0, 4, 4, False)
    assert first["wilson_low"] == 0.0 and first["agreement"] == 0.5 and first["majority_answer"] == "7"
    hardest = client.get(url, params={"order": "-difficulty", "limit": 3}).json()
    assert [p["position"] for p in hardest["items"]] == [2, 0, 4]
    by_position = client.get(url, params={"limit": 2}).json()
    assert by_position["probe_id"] == scored and by_position["items"][0]["difficulty"] == 0.75
    unscored_last = client.get(url, params={"order": "-difficulty", "offset": 5, "limit": 2}).json()
    assert all(p["difficulty"] is None for p in unscored_last["items"])


def test_explicit_probe_and_probe_of_another_pool(client, demo_pool):
    other = client.post("/api/pools/demo").json()
    running = add_probe(demo_pool["id"], "running", {0: 0.5})
    page = client.get(f"/api/pools/{demo_pool['id']}/prompts", params={"probe_id": running, "limit": 1}).json()
    assert page["probe_id"] == running and page["items"][0]["difficulty"] == 0.5
    response = client.get(f"/api/pools/{other['id']}/prompts", params={"probe_id": running})
    assert response.status_code == 404 and f"pool {other['id']}" in response.json()["detail"]


def test_presets_endpoint(client):
    body = client.get("/api/pools/presets").json()
    assert {p["name"] for p in body["presets"]} == {"gsm8k", "bbh", "math500"}
    assert {f["name"] for f in body["formats"]} == {"jsonl", "csv", "tsv", "parquet", "json"}
