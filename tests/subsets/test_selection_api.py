import csv
import io
import json

import pyarrow.parquet as pq
import pytest

from backend.curation.posterior import PassCounts, fit_prior, learnable_chance_posterior
from tests.subsets.conftest import K, make_probed_pool


def body(probe_id, strategy="hard", kind="count", value=10, **extra):
    return {"probe_id": probe_id, "strategy": strategy, "budget": {"kind": kind, "value": value, **extra.pop(
        "budget", {})}, **extra}


def test_preview_hard_picks_the_lowest_pass_rates_and_compares_every_strategy(client, probed_pool):
    response = client.post("/api/selections/preview", json=body(probed_pool.probe_id, group_size=4))
    assert response.status_code == 200, response.text
    preview = response.json()
    assert preview["n"] == 10 and not preview["clamped"] and preview["warning"] is None
    picked_rates = [p["pass_rate"] for p in preview["prompts"]]
    assert max(picked_rates) <= sorted(c / K for c in probed_pool.correct)[9]
    assert preview["difficulty_basis"] == "pass_rate" and preview["caveat"] is None
    # The forecast is the posterior mean given each prompt's (c, k), the prior fitted to the probe:
    # a 0/8 prompt does not forecast 0 as the plug-in c/k did.
    counts = PassCounts.of(probed_pool.correct, [K] * len(probed_pool.correct))
    chance = dict(zip(probed_pool.prompt_ids, learnable_chance_posterior(counts, 4, fit_prior(counts))[0],
                      strict=True))
    expected = sum(chance[p["id"]] for p in preview["prompts"]) / len(picked_rates)
    plug_in = sum(1 - x**4 - (1 - x) ** 4 for x in picked_rates) / len(picked_rates)
    assert preview["predicted_learnable_share"] == pytest.approx(expected) and expected > plug_in + 0.05
    assert preview["predicted_learnable_share_low"] < expected < preview["predicted_learnable_share_high"]
    strategies = {row["strategy"]: row for row in preview["comparison"]}
    assert set(strategies) == {"hard", "easy", "medium", "random", "base_wrong", "base_right", "band", "learnable",
                               "all"}
    assert strategies["hard"]["overlap_with_hard"] == 1.0
    assert strategies["hard"]["mean_pass_rate"] < strategies["easy"]["mean_pass_rate"]
    figure = preview["figure"]
    assert sum(figure["data"][0]["y"]) == 10 and sum(figure["data"][0]["y"]) + sum(figure["data"][1]["y"]) == 40


def test_preview_is_reproducible_and_seed_dependent_for_random(client, probed_pool):
    def ids(seed):
        res = client.post("/api/selections/preview", json=body(probed_pool.probe_id, "random", seed=seed))
        return [p["id"] for p in res.json()["prompts"]]

    assert ids(1) == ids(1)
    assert ids(1) != ids(2)


def test_budget_kinds_and_clamping(client, probed_pool):
    money = client.post("/api/selections/preview", json=body(
        probed_pool.probe_id, kind="money", value=0.3, budget={"cost_per_prompt": 0.1})).json()
    assert money["n"] == 3
    fraction = client.post("/api/selections/preview", json=body(probed_pool.probe_id, kind="fraction",
                                                                value=0.25)).json()
    assert fraction["n"] == 10
    clamped = client.post("/api/selections/preview", json=body(probed_pool.probe_id, value=500)).json()
    assert clamped["n"] == 40 and clamped["clamped"] and "500" in clamped["warning"] and "40" in clamped["warning"]


@pytest.mark.parametrize("payload, fragment", [
    ({"strategy": "hardest"}, "hard"),
    ({"budget": {"kind": "money", "value": 5}}, "cost_per_prompt"),
    ({"budget": {"kind": "fraction", "value": 1.5}}, "fraction"),
    ({"budget": {"kind": "count", "value": -1}}, "count"),
    ({"group_size": 1}, "group_size"),
    ({"strategy": "band", "band_low": 0.8, "band_high": 0.2}, "band"),
])
def test_bad_selection_requests_are_422_with_a_reason(client, probed_pool, payload, fragment):
    request = {**body(probed_pool.probe_id), **payload}
    response = client.post("/api/selections/preview", json=request)
    assert response.status_code == 422, response.text
    assert fragment in response.json()["detail"]


def test_selection_on_unfinished_probe_is_409(client, service_env):
    running = make_probed_pool(finished=False)
    response = client.post("/api/selections/preview", json=body(running.probe_id))
    assert response.status_code == 409 and "has not finished" in response.json()["detail"]
    assert client.post("/api/subsets", json=body(running.probe_id)).status_code == 409


def test_freeze_and_export_in_every_format(client, probed_pool):
    frozen = client.post("/api/subsets", json={**body(probed_pool.probe_id, value=12), "name": "hard 12"})
    assert frozen.status_code == 201, frozen.text
    subset = frozen.json()
    assert subset["n"] == 12 and subset["name"] == "hard 12" and subset["strategy"] == "hard"
    assert client.get(f"/api/subsets/{subset['id']}").json() == subset
    assert subset["id"] in [s["id"] for s in client.get(f"/api/subsets?probe_id={probed_pool.probe_id}").json()]
    # The frozen subset equals the preview of the same inputs.
    preview = client.post("/api/selections/preview", json=body(probed_pool.probe_id, value=12)).json()
    assert subset["difficulty_basis"] == "pass_rate"
    assert subset["predicted_learnable_share"] == pytest.approx(preview["predicted_learnable_share"])
    # The 95% interval at step 0 is stored with the subset and read back around the share.
    read = client.get(f"/api/subsets/{subset['id']}").json()
    for end in ("low", "high"):
        assert read[f"predicted_learnable_share_{end}"] == pytest.approx(preview[f"predicted_learnable_share_{end}"])
    assert read["predicted_learnable_share_low"] < read["predicted_learnable_share"] < \
        read["predicted_learnable_share_high"]

    jsonl = client.get(f"/api/subsets/{subset['id']}/export?format=jsonl")
    assert jsonl.status_code == 200
    assert 'filename="subset-' in jsonl.headers["content-disposition"]
    rows = [json.loads(line) for line in jsonl.text.splitlines()]
    assert [r["id"] for r in rows] == [p["external_id"] for p in preview["prompts"]]
    assert all({"prompt", "answer", "id", "difficulty"} <= set(r) for r in rows)
    assert rows[0]["prompt"].startswith("What is") and rows[0]["answer"] is not None

    csv_rows = list(csv.DictReader(io.StringIO(client.get(f"/api/subsets/{subset['id']}/export?format=csv").text)))
    assert [r["id"] for r in csv_rows] == [r["id"] for r in rows]

    parquet = client.get(f"/api/subsets/{subset['id']}/export?format=parquet")
    table = pq.read_table(io.BytesIO(parquet.content))
    assert table.column("id").to_pylist() == [r["id"] for r in rows]

    bad = client.get(f"/api/subsets/{subset['id']}/export?format=xlsx")
    assert bad.status_code == 422 and "jsonl" in bad.json()["detail"]


def test_base_wrong_takes_all_when_fewer_and_warns(client, probed_pool):
    wrong = sum(probed_pool.base_wrong)
    assert 0 < wrong < 39  # the fixture's seed gives a mix
    response = client.post("/api/selections/preview", json=body(probed_pool.probe_id, "base_wrong", value=39))
    preview = response.json()
    assert preview["n"] == wrong and f"Only {wrong} prompts qualify" in preview["warning"]
    picked = {p["id"] for p in preview["prompts"]}
    assert all(bw for pid, bw in zip(probed_pool.prompt_ids, probed_pool.base_wrong, strict=False) if pid in picked)


def test_label_free_probe_is_labelled_as_agreement_with_no_forecast(client, service_env):
    label_free = make_probed_pool(label_free=True)
    agreement = {pid: max(c, K - c) / K for pid, c in zip(label_free.prompt_ids, label_free.correct, strict=True)}
    preview = client.post("/api/selections/preview", json=body(label_free.probe_id)).json()
    assert preview["difficulty_basis"] == "agreement" and "Label the prompts" in preview["caveat"]
    assert preview["predicted_learnable_share"] is None and preview["predicted_learnable_share_low"] is None
    assert preview["mean_pass_rate"] is None and preview["advice"] is None
    assert preview["mean_agreement"] == pytest.approx(sum(agreement[p["id"]] for p in preview["prompts"]) / 10)
    assert all(p["pass_rate"] is None and p["agreement"] == pytest.approx(agreement[p["id"]])
               for p in preview["prompts"])
    assert [row["strategy"] for row in preview["comparison"]] == ["hard", "easy", "medium", "random", "base_wrong",
                                                                  "base_right", "all"]
    assert all(row["mean_pass_rate"] is None and row["predicted_learnable_share"] is None
               and row["mean_agreement"] is not None for row in preview["comparison"])
    assert preview["figure"]["layout"]["xaxis"]["title"]["text"] == "answer agreement"


@pytest.mark.parametrize("strategy", ["learnable", "band"])
def test_label_free_probe_refuses_pass_rate_strategies(client, service_env, strategy):
    label_free = make_probed_pool(label_free=True)
    for path in ("/api/selections/preview", "/api/subsets"):
        response = client.post(path, json=body(label_free.probe_id, strategy))
        assert response.status_code == 422, response.text
        assert "label-free" in response.json()["detail"] and "Label the prompts" in response.json()["detail"]


def test_label_free_subset_reads_as_agreement_with_no_forecast(client, service_env):
    label_free = make_probed_pool(label_free=True)
    frozen = client.post("/api/subsets", json=body(label_free.probe_id, "hard", value=5))
    assert frozen.status_code == 201, frozen.text
    subset = frozen.json()
    assert subset["difficulty_basis"] == "agreement" and subset["predicted_learnable_share"] is None
    assert subset["predicted_learnable_share_low"] is None and subset["predicted_learnable_share_high"] is None
    assert client.get(f"/api/subsets/{subset['id']}").json() == subset
    listed = client.get(f"/api/subsets?probe_id={label_free.probe_id}").json()
    assert listed == [subset]


def test_difficulty_of_a_running_probe_is_partial_and_of_a_failed_one_409(client, service_env):
    from sqlalchemy import delete

    from backend.database import session_scope
    from backend.jobs.service import transition
    from backend.jobs.tables import Job, JobStatus
    from backend.probes.tables import PromptScore

    running = make_probed_pool(finished=False)
    with session_scope() as session:  # as if only the first shard had finished
        session.execute(delete(PromptScore).where(PromptScore.probe_id == running.probe_id,
                                                  PromptScore.prompt_id.in_(running.prompt_ids[15:])))
        transition(session, session.get(Job, running.job_id), JobStatus.running, "test")
    partial = client.get(f"/api/probes/{running.probe_id}/difficulty").json()
    assert partial["partial"] is True and partial["prompt_count"] == 40
    assert partial["summary"]["count"] == 15 == sum(partial["histogram"]["counts"])
    with session_scope() as session:
        transition(session, session.get(Job, running.job_id), JobStatus.failed, "test")
    response = client.get(f"/api/probes/{running.probe_id}/difficulty")
    assert response.status_code == 409 and "partial scores are not used" in response.json()["detail"]
    finished = client.get(f"/api/probes/{make_probed_pool().probe_id}/difficulty").json()
    assert finished["partial"] is False and finished["summary"]["count"] == 40


def test_all_takes_the_whole_pool_and_base_right_the_prompts_first_answered_right(client, probed_pool):
    whole = client.post("/api/selections/preview", json=body(probed_pool.probe_id, strategy="all", value=5)).json()
    assert whole["n"] == 40 and whole["requested"] == 5 and "whole pool (40 probed prompts)" in whole["warning"]
    right = client.post("/api/selections/preview", json=body(probed_pool.probe_id, strategy="base_right",
                                                             value=40)).json()
    expected = sum(not wrong for wrong in probed_pool.base_wrong)
    assert right["n"] == expected and 0 < expected < 40
    rows = {row["strategy"]: row for row in right["comparison"]}
    assert rows["base_right"]["n_picked"] + rows["base_wrong"]["n_picked"] == 40 and rows["all"]["n_picked"] == 40


def test_the_preview_reads_the_regime_from_the_probe_and_the_forecasts(client, probed_pool):
    from backend.curation.advice import regime_advice

    preview = client.post("/api/selections/preview", json=body(probed_pool.probe_id, value=10)).json()
    summary = client.get(f"/api/probes/{probed_pool.probe_id}/difficulty").json()["summary"]
    assert preview["advice"] == regime_advice(summary, preview["comparison"])
    assert preview["advice"]["regime"] in {"beyond_reach", "within_reach", "saturated"}
