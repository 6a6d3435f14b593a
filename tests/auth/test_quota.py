"""Per-user quotas on unfinished jobs and on the tokens they will generate: a 429 that says what is in use and
what to cancel, and nothing written for the refused job."""

from tests.auth.conftest import bearer
from tests.conftest import clear_caches, client_on

PROBE = {"model": "tiny-random-SmolLM2", "k": 2, "max_new_tokens": 4}


def probe(client, pool: dict, token: str, **changes):
    return client.post("/api/probes", json={"pool_id": pool["id"], **PROBE, **changes}, headers=bearer(token))


def test_quotas_refuse_with_what_is_in_use_and_free_up_when_a_job_is_cancelled(app, own_database, monkeypatch,
                                                                               make_user):
    with client_on(app, monkeypatch, own_database) as client:
        _, alice = make_user("manager")
        _, bob = make_user("manager")
        pool = client.post("/api/pools/demo", json={}, headers=bearer(alice)).json()  # 200 prompts
        tokens = 200 * PROBE["k"] * PROBE["max_new_tokens"]  # 1,600 per probe
        monkeypatch.setenv("BUDGETLAB_QUOTA_ACTIVE_JOBS", "2")
        monkeypatch.setenv("BUDGETLAB_QUOTA_QUEUED_TOKENS", str(10**9))
        clear_caches()
        first = probe(client, pool, alice)
        second = probe(client, pool, alice)
        assert first.status_code == second.status_code == 202
        jobs_before = len(client.get("/api/jobs").json())
        third = probe(client, pool, alice)
        assert third.status_code == 429, third.text
        detail = third.json()["detail"]
        assert "2 unfinished jobs" in detail and f"job {first.json()['job']['id']} (probe, {tokens:,} tokens)" in detail
        assert "Cancel one" in detail
        assert len(client.get("/api/jobs").json()) == jobs_before  # the refused probe left no job behind
        # Another user's quota is their own.
        assert probe(client, pool, bob).status_code == 202
        # Cancelling frees a place.
        cancelled = client.post(f"/api/jobs/{first.json()['job']['id']}/cancel", headers=bearer(alice))
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        assert probe(client, pool, alice).status_code == 202

        # Tokens: room for one more probe of 1,600 tokens next to the two unfinished ones, not for a bigger one.
        monkeypatch.setenv("BUDGETLAB_QUOTA_ACTIVE_JOBS", "100")
        monkeypatch.setenv("BUDGETLAB_QUOTA_QUEUED_TOKENS", str(3 * tokens))
        clear_caches()
        bigger = probe(client, pool, alice, max_new_tokens=8)
        assert bigger.status_code == 429
        assert "would generate about 3,200 tokens and your unfinished jobs hold 3,200" in bigger.json()["detail"]
        assert probe(client, pool, alice).status_code == 202
