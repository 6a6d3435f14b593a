"""What moved (issue 10 §5): a trained run re-probed with its LoRA adapter through the real worker, compared with
the base model on its subset and its evaluation pool."""

import pytest
from sqlalchemy import update
from sqlmodel import select

from backend.curation.transitions import compare, tiers
from backend.database import session_scope
from tests.experiments.test_experiments import upload_exact_pool


def test_tiers_and_the_transition_table():
    assert tiers([0, 1, 4, 5, 8], [8, 8, 8, 8, 8]).tolist() == [0, 1, 2, 2, 3]
    result = compare([0, 0, 0, 2, 8], [8, 8, 8, 8, 8], [0, 3, 8, 1, 8], [8, 8, 8, 8, 8])
    assert result["transitions"] == [[1, 1, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]]
    assert result["newly_solved"] == [1, 2]
    never = result["by_tier"][0]
    assert never == {"tier": "never", "prompts": 3, "pass_before": 0.0, "pass_after": pytest.approx(11 / 24),
                     "gain": pytest.approx(11 / 24)}
    assert [row["tier"] for row in result["by_tier"]] == ["never", "rarely", "always"]  # no prompt was "often"
    assert result["pass_before"] == pytest.approx(10 / 40) and result["pass_after"] == pytest.approx(20 / 40)


@pytest.fixture(scope="module")
def yes_no_model(service_tiny_model, tmp_path_factory) -> str:
    from tests.experiments.yes_no_model import build_yes_no_model

    return str(build_yes_no_model(service_tiny_model, tmp_path_factory.mktemp("yes-no"), {"yes": 0.5, "no": 0.3}))


def test_a_trained_run_is_reprobed_with_its_adapter(client, worker, yes_no_model):
    from backend.jobs.tables import Job
    from backend.probes.tables import Sample
    from tests.conftest import wait_for_job

    pool_id = upload_exact_pool(client, "reprobe train", ["yes"] * 8 + ["no"] * 8)
    held_out = upload_exact_pool(client, "reprobe held-out", ["yes"] * 4 + ["no"] * 8)
    probe = client.post("/api/probes", json={"pool_id": pool_id, "model": yes_no_model, "k": 8,
                                             "max_new_tokens": 1, "seed": 1}).json()
    assert wait_for_job(client, probe["job_id"], timeout=300)["status"] == "succeeded"
    subset = client.post("/api/subsets", json={"probe_id": probe["id"], "strategy": "hard",
                                               "budget": {"kind": "count", "value": 8}, "group_size": 4}).json()
    settings = {"model": yes_no_model, "lora_rank": 4, "lora_alpha": 8, "num_generations": 4, "batch_size": 4,
                "max_completion_length": 1, "learning_rate": 1e-2, "max_steps": 6, "seed": 3,
                "eval_pool_id": held_out, "eval_every": 6, "eval_samples": 12}
    run = client.post("/api/runs", json={"subset_id": subset["id"], "settings": settings})
    assert run.status_code == 201, run.text
    run = run.json()

    refused = client.post(f"/api/runs/{run['id']}/reprobe")  # still queued or training
    assert refused.status_code == 409 and "only a run that trained to the end" in refused.json()["detail"]
    assert wait_for_job(client, run["job"]["id"], timeout=600)["status"] == "succeeded"
    assert client.get(f"/api/runs/{run['id']}/moved").json()["scopes"] == []

    started = client.post(f"/api/runs/{run['id']}/reprobe")
    assert started.status_code == 202, started.text
    scopes = {scope["scope"]: scope for scope in started.json()["scopes"]}
    assert set(scopes) == {"training", "evaluation"}
    assert scopes["training"]["baseline_probe_id"] == probe["id"] and scopes["training"]["pool_id"] == pool_id
    assert scopes["evaluation"]["pool_id"] == held_out
    again = client.post(f"/api/runs/{run['id']}/reprobe").json()  # the same probes, not new ones
    assert [s["probe_id"] for s in again["scopes"]] == [s["probe_id"] for s in started.json()["scopes"]]

    for scope in scopes.values():
        for probe_id in (scope["probe_id"], scope["baseline_probe_id"]):
            job_id = client.get(f"/api/probes/{probe_id}").json()["job_id"]
            assert wait_for_job(client, job_id, timeout=300)["status"] == "succeeded"
    after_training = client.get(f"/api/probes/{scopes['training']['probe_id']}").json()
    assert after_training["prompt_count"] == 8 and after_training["k"] == 8 and after_training["seed"] == 1

    moved = {scope["scope"]: scope for scope in client.get(f"/api/runs/{run['id']}/moved").json()["scopes"]}
    for name, prompts in (("training", 8), ("evaluation", 12)):
        comparison = moved[name]["comparison"]
        assert comparison["prompts"] == prompts
        assert sum(map(sum, comparison["transitions"])) == prompts
        assert sum(row["prompts"] for row in comparison["by_tier"]) == prompts
        assert comparison["newly_solved_count"] == sum(comparison["transitions"][0][1:])
        assert len(comparison["newly_solved"]) == comparison["newly_solved_count"]
        for prompt in comparison["newly_solved"]:
            assert prompt["correct_before"] == 0 < prompt["correct_after"]

    # The evaluation pool's baseline and re-probe use the same seeds batch for batch: only the adapter differs, and
    # it changed what the model samples.
    with session_scope() as session:
        def completions(probe_id):
            return session.exec(select(Sample.prompt_id, Sample.sample_index, Sample.completion)
                                .where(Sample.probe_id == probe_id).order_by(Sample.prompt_id,
                                                                              Sample.sample_index)).all()

        before = completions(moved["evaluation"]["baseline_probe_id"])
        after = completions(moved["evaluation"]["probe_id"])
    assert [row[:2] for row in before] == [row[:2] for row in after] and len(before) == 12 * 8
    assert sum(b[2] != a[2] for b, a in zip(before, after, strict=True)) > 0

    # The re-probe says whose adapter it applied; the pool's prompts keep the base model's scores by default.
    assert client.get(f"/api/probes/{moved['training']['probe_id']}").json()["adapter_run_id"] == run["id"]
    assert client.get(f"/api/probes/{probe['id']}").json()["adapter_run_id"] is None
    page = client.get(f"/api/pools/{pool_id}/prompts?limit=100").json()
    assert page["probe_id"] == probe["id"]

    # A scope whose probe failed is re-probed anew, alone; its old link goes.
    from backend.jobs.service import fail_unless_finished

    with session_scope() as session:
        failed = client.get(f"/api/probes/{moved['evaluation']['probe_id']}").json()["job_id"]
        session.execute(update(Job).where(Job.id == failed).values(status="running"))
        fail_unless_finished(session, failed, "lost for the test")
    retried = {s["scope"]: s for s in client.post(f"/api/runs/{run['id']}/reprobe").json()["scopes"]}
    assert retried["training"]["probe_id"] == moved["training"]["probe_id"]
    assert retried["evaluation"]["probe_id"] != moved["evaluation"]["probe_id"]
    assert retried["evaluation"]["baseline_probe_id"] == moved["evaluation"]["baseline_probe_id"]  # still good
    assert len(client.get(f"/api/runs/{run['id']}/moved").json()["scopes"]) == 2


def test_the_capacity_boundary_of_an_experiment(client, worker, yes_no_model):
    from tests.conftest import wait_for_job
    from tests.experiments.test_experiments import wait_for_experiment

    pool_id = upload_exact_pool(client, "capacity train", ["yes"] * 6 + ["no"] * 6 + ["zebra"] * 4)
    held_out = upload_exact_pool(client, "capacity held-out", ["yes"] * 4 + ["no"] * 6 + ["zebra"] * 2)
    probe = client.post("/api/probes", json={"pool_id": pool_id, "model": yes_no_model, "k": 8,
                                             "max_new_tokens": 1, "seed": 1}).json()
    assert wait_for_job(client, probe["job_id"], timeout=300)["status"] == "succeeded"
    settings = {"model": yes_no_model, "lora_rank": 4, "lora_alpha": 8, "num_generations": 4, "batch_size": 4,
                "max_completion_length": 1, "learning_rate": 1e-2, "max_steps": 4, "seed": 5,
                "eval_pool_id": held_out, "eval_every": 4, "eval_samples": 12}
    experiment = client.post("/api/experiments", json={"probe_id": probe["id"], "strategies": ["hard", "easy"],
                                                       "budget": {"kind": "count", "value": 4},
                                                       "settings": settings}).json()
    assert client.get(f"/api/experiments/{experiment['id']}/capacity").json() == {"strategies": [], "pending": 0,
                                                                                    "figure": None}
    experiment = wait_for_experiment(client, experiment["id"])
    assert experiment["status"] == "succeeded"

    started = client.post(f"/api/experiments/{experiment['id']}/reprobe")
    assert started.status_code == 202, started.text
    assert started.json()["pending"] == 2  # the two runs' evaluation re-probes
    baselines = set()
    for run in experiment["runs"]:
        for scope in client.get(f"/api/runs/{run['id']}/moved").json()["scopes"]:
            for probe_id in (scope["probe_id"], scope["baseline_probe_id"]):
                job_id = client.get(f"/api/probes/{probe_id}").json()["job_id"]
                assert wait_for_job(client, job_id, timeout=300)["status"] == "succeeded"
            if scope["scope"] == "evaluation":
                baselines.add(scope["baseline_probe_id"])
    assert len(baselines) == 1  # one probe of the base model on the evaluation pool serves both runs

    capacity = client.get(f"/api/experiments/{experiment['id']}/capacity").json()
    assert capacity["pending"] == 0
    assert sorted(s["strategy"] for s in capacity["strategies"]) == ["easy", "hard"]
    for strategy in capacity["strategies"]:
        assert strategy["runs"] == 1
        assert sum(row["prompts"] for row in strategy["tiers"]) == 12
        assert "never" in [row["tier"] for row in strategy["tiers"]]  # the zebra prompts
        for row in strategy["tiers"]:
            assert row["gain"] == pytest.approx(row["pass_after"] - row["pass_before"])
    assert [trace["name"] for trace in capacity["figure"]["data"]] == [s["strategy"] for s in capacity["strategies"]]
