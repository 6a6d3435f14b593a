"""The runs API: every bad input answered in words before anything is written or queued."""

import re

from sqlalchemy import func
from sqlmodel import select

from backend.database import session_scope
from backend.jobs.tables import Job
from backend.runs.tables import Run
from tests.runs.conftest import make_subset
from tests.subsets.conftest import make_probed_pool


def counts() -> tuple[int, int]:
    with session_scope() as session:
        return (session.exec(select(func.count()).select_from(Run)).one(),
                session.exec(select(func.count()).select_from(Job).where(Job.kind == "train")).one())


def refused(client, body: dict, status: int) -> dict:
    before = counts()
    response = client.post("/api/runs", json=body)
    assert response.status_code == status, response.text
    assert counts() == before  # nothing written, nothing queued
    return response.json()


def test_subset_without_answers_is_409_saying_how_to_add_them(client):
    body = refused(client, {"subset_id": make_subset(label_free=True)}, 409)
    assert re.search(r"\d+ of the \d+ prompts of subset \d+ have no answer", body["detail"]), body["detail"]
    assert "Export the subset for labeling, import the labels" in body["detail"]


def test_batch_not_divisible_by_the_group_size_is_422_with_the_rule(client):
    body = refused(client, {"subset_id": make_subset(), "settings": {"num_generations": 4, "batch_size": 6}}, 422)
    assert "batch_size (6 completions per step) must be divisible by num_generations (4)" in body["detail"]
    assert body["details"]["problems"]


def test_out_of_range_and_unknown_settings_are_422(client):
    subset_id = make_subset()
    body = refused(client, {"subset_id": subset_id, "settings": {"max_steps": 0, "lora_rank": 10_000}}, 422)
    assert "max_steps = 0 is out of range" in body["detail"] and "lora_rank = 10000" in body["detail"]
    body = refused(client, {"subset_id": subset_id, "settings": {"learning_rte": 1e-5}}, 422)
    assert "learning_rte is not a training setting" in body["detail"]
    body = refused(client, {"subset_id": subset_id, "settings": {"lora_target_modules": ["q_proj", "lm_head"]}}, 422)
    assert "lm_head" in body["detail"]


def test_evaluation_pool_without_answers_is_409(client):
    unlabeled = make_probed_pool(5, label_free=True)
    body = refused(client, {"subset_id": make_subset(), "settings": {"eval_pool_id": unlabeled.pool_id,
                                                                      "eval_every": 1, "max_steps": 2}}, 409)
    assert f"Evaluation pool {unlabeled.pool_id}" in body["detail"] and "no answers" in body["detail"]
    body = refused(client, {"subset_id": make_subset(), "settings": {"ood_pool_ids": [unlabeled.pool_id]}}, 409)
    assert "Out-of-distribution pool" in body["detail"]


def test_unknown_model_and_preset_are_422_with_the_allowed_values(client):
    subset_id = make_subset()
    body = refused(client, {"subset_id": subset_id, "settings": {"model": "gpt-17"}}, 422)
    assert "SmolLM2-135M-Instruct" in body["details"]["available"]
    body = refused(client, {"subset_id": subset_id, "preset": "fast"}, 422)
    assert body["details"]["allowed"] == ["paper", "demo_cpu", "quick_cpu"]


def test_missing_subset_and_pools_are_404(client):
    refused(client, {"subset_id": 10**9}, 404)
    refused(client, {"subset_id": make_subset(), "settings": {"eval_pool_id": 10**9, "eval_every": 1}}, 404)
    assert client.get(f"/api/runs/{10**9}").status_code == 404


def test_presets_endpoint_lists_valid_settings(client):
    presets = client.get("/api/training/presets").json()
    assert presets["presets"]["paper"]["lora_rank"] == 32 and presets["presets"]["paper"]["max_steps"] == 1000
    assert presets["presets"]["quick_cpu"]["batch_size"] % presets["presets"]["quick_cpu"]["num_generations"] == 0
    assert presets["defaults"]["model"] is None  # a run trains its probe's model unless told otherwise
    assert all("model" not in values or values["model"] is None for values in presets["presets"].values())
    assert presets["presets"]["paper"]["grading_policy"] == "strict"


def test_a_run_sent_while_the_broker_is_down_waits_in_the_outbox_and_is_sent_later(app, own_database, monkeypatch):
    """The run and its task are committed together; when the broker is down the task stays unsent (the job
    says so) and the reconciler sends it once the broker is back: nothing is lost, nothing fails."""
    from datetime import timedelta

    from sqlalchemy import update

    from backend.jobs.broker import get_celery
    from backend.jobs.reconciler import reconcile_once
    from backend.jobs.tables import JobTask
    from backend.settings import get_settings
    from tests.conftest import client_on

    # A database of its own: the reconciler pass below acts on every job of it.
    with client_on(app, monkeypatch, {**own_database, "CELERY_BROKER_URL": "redis://127.0.0.1:1/0"}) as client:
        subset_id = make_subset()  # port 1: nobody listens
        response = client.post("/api/runs", json={"subset_id": subset_id, "settings": {"max_steps": 2}})
    for key, value in own_database.items():  # the broker is back (the session's Redis), the database kept
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    get_celery.cache_clear()
    assert response.status_code == 201, response.text
    job = response.json()["job"]
    assert job["status"] == "queued" and "the task broker could not be reached" in job["message"]
    with session_scope() as session:
        task = session.exec(select(JobTask).where(JobTask.job_id == job["id"])).one()
        assert task.sent_at is None and task.sends == 0
        session.execute(update(JobTask).where(JobTask.id == task.id)  # older than the reconciler's grace
                        .values(created_at=task.created_at - timedelta(minutes=1)))
    assert job["id"] in reconcile_once().sent
    with session_scope() as session:
        task = session.exec(select(JobTask).where(JobTask.job_id == job["id"])).one()
        assert task.sent_at is not None and task.sends == 1


def test_another_model_than_the_probes_is_422_unless_allowed(client):
    body = refused(client, {"subset_id": make_subset(), "settings": {"model": "SmolLM2-135M-Instruct"}}, 422)
    assert "allow_other_model" in body["detail"] and "tiny-random-SmolLM2" in body["detail"]
