"""Prompts longer than the model's context are refused at import with their lines, or cut and counted."""

import json

import pytest

from tests.conftest import clear_caches
from tests.pools.conftest import upload

LIMIT = 40


def pool_file() -> bytes:
    rows = [{"prompt": "short one?", "answer": "1"}, {"prompt": "x" * (LIMIT + 1), "answer": "2"},
            {"prompt": "also short?", "answer": "3"}, {"prompt": "y" * 500, "answer": "4"}]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@pytest.fixture
def prompt_limit():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BUDGETLAB_MAX_PROMPT_CHARS", str(LIMIT))
        clear_caches()
        yield
    clear_caches()  # the settings without the limit, for the tests after


def test_long_prompts_are_refused_or_cut(any_client, prompt_limit):
    pools_before = len(any_client.get("/api/pools").json())
    refused = upload(any_client, "long.jsonl", pool_file())
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "2 prompts are longer than 40 characters" in detail and "lines 2, 4" in detail
    assert "long_prompts=truncate" in detail
    assert len(any_client.get("/api/pools").json()) == pools_before  # nothing half written

    cut = upload(any_client, "long.jsonl", pool_file(), long_prompts="truncate")
    assert cut.status_code == 201, cut.text
    assert cut.json()["report"]["truncated_prompts"] == 2 and cut.json()["prompt_count"] == 4
    prompts = any_client.get(f"/api/pools/{cut.json()['id']}/prompts").json()["items"]
    assert sorted(len(p["text"]) for p in prompts) == [10, 11, LIMIT, LIMIT]

    wrong = upload(any_client, "long.jsonl", pool_file(), long_prompts="drop")
    assert wrong.status_code == 422 and "refuse or truncate" in wrong.json()["detail"]
