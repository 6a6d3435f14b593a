"""The whole flow over the API on Postgres + Redis with a real Celery worker:
demo pool → probe → histogram → prompts by difficulty → samples → preview → freeze → export."""

import json
import time

from tests.conftest import wait_for_job

TINY = "tiny-random-SmolLM2"


def test_demo_pool_to_exported_subset(client, worker):
    pool = client.post("/api/pools/demo").json()
    assert pool["prompt_count"] >= 150 and pool["has_answers"]

    created = client.post("/api/probes", json={"pool_id": pool["id"], "model": TINY, "k": 4,
                                               "max_new_tokens": 12, "seed": 3})
    assert created.status_code == 202, created.text
    probe = created.json()
    # The response is read after the shards' tasks were sent: a fast worker may have claimed one already.
    assert probe["job"]["status"] in ("queued", "running") and probe["label_free"] is False
    job = wait_for_job(client, probe["job_id"])
    assert job["status"] == "succeeded", job
    assert job["progress_done"] == job["progress_total"] == pool["prompt_count"]
    assert client.get(f"/api/probes/{probe['id']}").json()["samples_per_second"] > 0

    difficulty = client.get(f"/api/probes/{probe['id']}/difficulty?bins=10").json()
    assert difficulty["metric"] == "pass_rate"
    assert sum(difficulty["histogram"]["counts"]) == pool["prompt_count"] == difficulty["summary"]["count"]
    assert difficulty["figure"]["data"][0]["type"] == "bar"

    page = client.get(f"/api/pools/{pool['id']}/prompts?order=-difficulty&limit=20").json()
    difficulties = [item["difficulty"] for item in page["items"]]
    assert difficulties == sorted(difficulties, reverse=True) and page["total"] == pool["prompt_count"]
    first = page["items"][0]
    detail = client.get(f"/api/probes/{probe['id']}/prompts/{first['id']}/samples").json()
    assert len(detail["samples"]) == 4
    assert sum(s["correct"] for s in detail["samples"]) == detail["score"]["correct_count"]
    low, high = detail["score"]["wilson_low"], detail["score"]["wilson_high"]
    assert low <= detail["score"]["pass_rate"] <= high

    request = {"probe_id": probe["id"], "strategy": "hard", "budget": {"kind": "fraction", "value": 0.1}}
    preview = client.post("/api/selections/preview", json=request).json()
    assert preview["n"] == pool["prompt_count"] // 10
    subset = client.post("/api/subsets", json=request).json()
    exported = client.get(f"/api/subsets/{subset['id']}/export?format=jsonl").text.splitlines()
    assert len(exported) == subset["n"] == preview["n"]
    assert json.loads(exported[0])["id"] == preview["prompts"][0]["external_id"]


def test_probe_cancelled_mid_run_stops_and_keeps_finished_shards(client, worker):
    pool = client.post("/api/pools/demo").json()
    probe = client.post("/api/probes", json={"pool_id": pool["id"], "model": TINY, "k": 8,
                                             "max_new_tokens": 64}).json()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        job = client.get(f"/api/jobs/{probe['job_id']}").json()
        if job["status"] == "running" and job["progress_done"] > 0:
            assert job["samples_per_second"] > 0 and job["eta_seconds"] is not None
            break
        assert job["status"] in ("queued", "running"), job
        time.sleep(0.2)
    cancelled = client.post(f"/api/jobs/{probe['job_id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] in ("cancelling", "cancelled")
    job = wait_for_job(client, probe["job_id"], timeout=300)
    assert job["status"] == "cancelled", job
    assert job["progress_done"] < pool["prompt_count"]
    again = client.post(f"/api/jobs/{probe['job_id']}/cancel")
    assert again.status_code == 409 and "already finished" in again.json()["detail"]
    events = [e["to_status"] for e in client.get(f"/api/jobs/{probe['job_id']}/events").json()]
    assert events[-2:] == ["cancelling", "cancelled"]
    assert client.post("/api/selections/preview", json={
        "probe_id": probe["id"], "strategy": "hard", "budget": {"kind": "count", "value": 5}}).status_code == 409


def test_probe_bad_settings_are_422(client):
    pool = client.post("/api/pools/demo").json()
    unknown = client.post("/api/probes", json={"pool_id": pool["id"], "model": "gpt-17"})
    assert unknown.status_code == 422 and "SmolLM2-135M-Instruct" in unknown.json()["detail"]
    assert "tiny-random-SmolLM2" in unknown.json()["details"]["available"]
    for field, value in (("k", 0), ("k", 65), ("temperature", 2.5), ("max_new_tokens", 0)):
        response = client.post("/api/probes", json={"pool_id": pool["id"], field: value})
        assert response.status_code == 422 and field in response.json()["detail"], response.text
    template = client.post("/api/probes", json={"pool_id": pool["id"], "template": "Solve: {question}"})
    assert template.status_code == 422 and "{prompt}" in template.json()["detail"]
    missing = client.post("/api/probes", json={"pool_id": 10**9})
    assert missing.status_code == 404


def test_default_model_probes_real_gsm8k_prompts_through_the_worker(client, worker):
    """The embedded default model, for real, on three GSM8K test questions."""
    from tests.conftest import DATASETS

    lines = (DATASETS / "gsm8k" / "test.jsonl").read_text().splitlines()[:3]
    upload = client.post("/api/pools", data={"preset": "gsm8k", "name": "gsm8k-3"},
                         files={"file": ("gsm8k.jsonl", "\n".join(lines).encode(), "application/jsonl")})
    assert upload.status_code == 201, upload.text
    pool = upload.json()
    probe = client.post("/api/probes", json={"pool_id": pool["id"], "k": 2, "max_new_tokens": 96}).json()
    assert probe["model"] == "SmolLM2-135M-Instruct"
    job = wait_for_job(client, probe["job_id"], timeout=900)
    assert job["status"] == "succeeded", job
    page = client.get(f"/api/pools/{pool['id']}/prompts?order=position").json()
    for item in page["items"]:
        detail = client.get(f"/api/probes/{probe['id']}/prompts/{item['id']}/samples").json()
        assert len(detail["samples"]) == 2 and all(s["completion"].strip() for s in detail["samples"])
        assert all(s["correct"] in (True, False) for s in detail["samples"])
        # The model's text went through the grader: a correct sample's answer equals the gold number.
        for sample in detail["samples"]:
            assert sample["correct"] == (sample["extracted_answer"] == detail["prompt"]["gold"])
        assert detail["score"]["pass_rate"] == sum(s["correct"] for s in detail["samples"]) / 2
