"""Experiments over the API with a real Celery worker and the tiny model: one subset and one GRPO run
per strategy, evaluation, OOD pass@k, the comparison, downloads, cancel, and bad input."""

import csv
import io
import json
import time
import zipfile

import numpy as np
import pytest
from sqlalchemy import func
from sqlmodel import select

from backend.database import session_scope
from backend.experiments.tables import Experiment
from backend.runs.tables import Run
from backend.subsets.tables import Subset
from tests.subsets.conftest import make_probed_pool

TINY = {"model": "tiny-random-SmolLM2", "lora_rank": 4, "lora_alpha": 8, "num_generations": 2, "batch_size": 2,
        "max_completion_length": 8, "learning_rate": 1e-3, "seed": 11}


def wait_for_experiment(client, experiment_id: int, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        experiment = client.get(f"/api/experiments/{experiment_id}").json()
        if all(run["job"]["status"] in ("succeeded", "failed", "cancelled") for run in experiment["runs"]):
            return experiment
        time.sleep(0.5)
    raise AssertionError(f"experiment {experiment_id} did not finish in {timeout}s: {experiment}")


def independent_fit(client, run_ids: list[int]) -> tuple[list[float], list[float], float | None]:
    """Learnable % and gain recomputed from each run's raw metrics, then R² by numpy."""
    xs, ys = [], []
    for run_id in run_ids:
        series = client.get(f"/api/runs/{run_id}/metrics?keys=eval/accuracy,frac_reward_zero_std").json()["series"]
        accuracy = dict(zip(series["eval/accuracy"]["steps"], series["eval/accuracy"]["values"], strict=True))
        zero_std = series["frac_reward_zero_std"]["values"]
        xs.append(100 * np.mean([z < 1 for z in zero_std]))  # steps where some group's rewards differ
        ys.append(accuracy[max(accuracy)] - accuracy[0])
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return xs, ys, None
    return xs, ys, float(np.corrcoef(xs, ys)[0, 1] ** 2)


@pytest.fixture(scope="module")
def yes_no_model(service_tiny_model, tmp_path_factory) -> str:
    from tests.experiments.yes_no_model import build_yes_no_model

    return str(build_yes_no_model(service_tiny_model, tmp_path_factory.mktemp("yes-no"), {"yes": 0.5, "no": 0.3}))


def upload_exact_pool(client, name: str, golds: list[str]) -> int:
    rows = "".join(json.dumps({"prompt": f"Question {i}: answer in one word.", "answer": gold}) + "\n"
                   for i, gold in enumerate(golds))
    response = client.post("/api/pools", files={"file": (f"{name}.jsonl", rows.encode())},
                           data={"name": name, "task_type": "exact", "answer_field": "answer"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_three_strategies_train_through_the_worker_and_compare(client, worker, yes_no_model):
    from tests.conftest import wait_for_job

    # Gold "yes" (pass rate ~0.5), "no" (~0.3) and "zebra" (0): hard, easy and medium pick different ones.
    pool_id = upload_exact_pool(client, "yes-no train", ["yes"] * 4 + ["no"] * 8 + ["zebra"] * 4)
    held_out = upload_exact_pool(client, "yes-no held-out", ["yes"] * 2 + ["no"] * 6)
    ood = upload_exact_pool(client, "yes-no ood", ["no", "zebra", "yes"])
    probe = client.post("/api/probes", json={"pool_id": pool_id, "model": yes_no_model, "k": 8,
                                             "max_new_tokens": 1, "seed": 1}).json()
    assert wait_for_job(client, probe["job_id"], timeout=300)["status"] == "succeeded"
    settings = {"model": yes_no_model, "lora_rank": 4, "lora_alpha": 8, "num_generations": 4, "batch_size": 4,
                "max_completion_length": 1, "learning_rate": 1e-2, "max_steps": 6, "seed": 11,
                "eval_pool_id": held_out, "eval_every": 3, "eval_samples": 8, "ood_pool_ids": [ood], "ood_k": 2}
    created = client.post("/api/experiments", json={"probe_id": probe["id"], "strategies": ["hard", "easy", "medium"],
                                                    "budget": {"kind": "count", "value": 4}, "settings": settings})
    assert created.status_code == 201, created.text
    experiment = created.json()
    assert [run["strategy"] for run in experiment["runs"]] == ["hard", "easy", "medium"]
    assert experiment["n"] == 4 and experiment["status"] == "queued"
    assert len({json.dumps(run["settings"], sort_keys=True) for run in experiment["runs"]}) == 1  # identical
    with session_scope() as session:
        subsets = [session.get(Subset, run["subset_id"]) for run in experiment["runs"]]
        assert [s.n for s in subsets] == [4, 4, 4] and {s.group_size for s in subsets} == {4}
        assert {s.seed for s in subsets} == {11}

    experiment = wait_for_experiment(client, experiment["id"])
    assert experiment["status"] == "succeeded", [run["job"] for run in experiment["runs"]]
    # Same model, prompts and greedy decoding: the first run to evaluate step 0 measures it, the others copy it.
    copied = {run["id"]: client.get(f"/api/runs/{run['id']}/metrics?keys=eval/base_from_run").json()["series"]
              .get("eval/base_from_run", {}).get("values") for run in experiment["runs"]}
    measured = [run_id for run_id, source in copied.items() if source is None]
    assert measured and all(source[0] in measured for source in copied.values() if source is not None)
    assert len(measured) < len(copied)  # one worker runs them in turn: at least one run copied it
    for run in experiment["runs"]:
        assert run["adapter_available"] and run["library_versions"]["trl"] and run["library_versions"]["device"]
        series = client.get(f"/api/runs/{run['id']}/metrics").json()["series"]
        assert series["eval/accuracy"]["steps"] == [0, 3, 6]  # the base model, then every eval_every steps
        assert series["eval/accuracy"]["values"][0] == 0.25  # greedy says "yes"; 2 of 8 golds are "yes"
        assert series["loss"]["steps"] == [1, 2, 3, 4, 5, 6]
        for share, zero in zip(series["learnable_share"]["values"], series["frac_reward_zero_std"]["values"],
                               strict=True):
            assert share == pytest.approx(1 - zero)
        assert {f"ood/{ood}/pass@2", f"ood/{ood}/base_pass@2"} <= set(series)

    comparison = client.get(f"/api/experiments/{experiment['id']}/compare").json()
    rows = comparison["table"]
    assert [row["strategy"] for row in rows] == ["hard", "easy", "medium"]
    for row in rows:  # 95% intervals around each accuracy and gain, and the noise flags they imply
        assert row["eval_samples"] == 8
        for value, interval in [(row["base_accuracy"], row["base_accuracy_interval"]),
                                (row["final_accuracy"], row["final_accuracy_interval"]),
                                (row["gain"], row["gain_interval"])]:
            assert interval[0] <= value <= interval[1] and interval[1] - interval[0] > 0.2  # 8 prompts: wide
        assert row["gain_beyond_noise"] == (row["gain_interval"][0] > 0 or row["gain_interval"][1] < 0)
        assert row["learnable_share_error"] == pytest.approx(row["measured_learnable_share"]
                                                             - row["predicted_learnable_share"])
    best = max(rows, key=lambda row: row["final_accuracy"])
    assert best["within_noise_of_best"] is True
    probe_row = client.get(f"/api/probes/{probe['id']}").json()
    for row in rows:  # what each run cost: 16 prompts × k = 8 probed, the run's own step times
        steps = client.get(f"/api/runs/{row['run_id']}/metrics?keys=step_time").json()["series"]["step_time"]
        cost = row["cost"]
        assert cost["labels"] == 4 and cost["label_cost"] is None  # no price per label was given
        assert cost["probe_samples"] == 16 * 8 and cost["probe_tokens_at_most"] == 16 * 8 * 1
        assert cost["probe_seconds"] == pytest.approx(16 * 8 / probe_row["samples_per_second"])
        assert cost["training_seconds"] == pytest.approx(sum(steps["values"]))
        assert cost["device"] == "cpu"
    for row in rows:  # steps to 95% of the best final accuracy, from the raw curve
        curve = client.get(f"/api/runs/{row['run_id']}/metrics?keys=eval/accuracy").json()["series"]["eval/accuracy"]
        reached = [s for s, v in zip(curve["steps"], curve["values"], strict=True)
                   if s > 0 and v >= 0.95 * best["final_accuracy"]]
        assert row["steps_to_95"] == (reached[0] if reached else None)
    assert all(row["n"] == 4 and row["seed"] == 11 and row["settings"]["lora_rank"] == 4 for row in rows)
    assert all(set(row["ood"]) == set(row["ood_base"]) == {f"yes-no ood (#{ood}) pass@2"} for row in rows)
    predicted = [row["predicted_learnable_share"] for row in rows]
    assert predicted[0] < predicted[1] and predicted[0] <= predicted[2]  # hard's groups are mostly all-wrong
    xs, ys, r2 = independent_fit(client, [row["run_id"] for row in rows])
    print("learnable %", xs, "gain", ys, "R²", r2)
    assert [row["learnable_pct"] for row in rows] == pytest.approx(xs)
    assert [row["gain"] for row in rows] == pytest.approx(ys)
    fit = comparison["fit"]
    assert fit["n_points"] == 3 and r2 is not None  # the runs differ: a real fit
    assert fit["r2"] == pytest.approx(r2, rel=1e-9)
    accuracy_lines = comparison["figures"]["eval_accuracy"]["data"]
    assert [line["name"] for line in accuracy_lines] == ["hard", "easy", "medium"]
    assert all(line["x"] == [0, 3, 6] for line in accuracy_lines)
    for line in accuracy_lines:  # 95% Wilson error bars on 8 evaluation prompts
        bars = line["error_y"]
        assert all(0 <= y - low <= y and 0 <= high <= 1 - y + 1e-12 for y, low, high in
                   zip(line["y"], bars["arrayminus"], bars["array"], strict=True))
        assert all(low + high > 0.2 for low, high in zip(bars["arrayminus"], bars["array"], strict=True))
    scatter = comparison["figures"]["scatter"]["data"]
    assert scatter[0]["x"] == pytest.approx(xs) and scatter[0]["y"] == pytest.approx(ys)
    assert scatter[1]["name"] == "least-squares fit" and f"R² = {fit['r2']:.3f}" in \
        comparison["figures"]["scatter"]["layout"]["title"]["text"]

    run = experiment["runs"][0]
    table = list(csv.DictReader(io.StringIO(client.get(f"/api/runs/{run['id']}/metrics.csv").text)))
    assert [row["step"] for row in table] == ["0", "1", "2", "3", "4", "5", "6"]
    assert table[0]["learnable_share"] == "" and 0 <= float(table[1]["learnable_share"]) <= 1  # step 0: eval only
    archive = zipfile.ZipFile(io.BytesIO(client.get(f"/api/runs/{run['id']}/adapter").content))
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(archive.namelist())
    assert json.loads(archive.read("adapter_config.json"))["r"] == 4
    figures = client.get(f"/api/runs/{run['id']}/figures").json()["figures"]
    assert figures["reward"]["data"][0]["x"] == [1, 2, 3, 4, 5, 6]
    assert figures["eval_accuracy"]["data"][0]["x"] == [0, 3, 6]
    assert figures["kl"]["data"] == [] and "beta = 0" in figures["kl"]["layout"]["annotations"][0]["text"]
    config = client.get(f"/api/runs/{run['id']}/config").json()
    assert config["grpo_config"]["per_device_train_batch_size"] == 4 and config["grpo_config"]["num_generations"] == 4
    assert config["lora_config"]["r"] == 4 and config["device"] == "cpu"

    cancelled = client.post(f"/api/jobs/{run['job']['id']}/cancel")
    assert cancelled.status_code == 409 and "already finished" in cancelled.json()["detail"]


def test_strategies_repeated_over_seeds_are_summarised_with_intervals(client, worker, yes_no_model):
    from tests.conftest import wait_for_job

    pool_id = upload_exact_pool(client, "yes-no seeds", ["yes"] * 4 + ["no"] * 8 + ["zebra"] * 4)
    held_out = upload_exact_pool(client, "yes-no seeds held-out", ["yes"] * 2 + ["no"] * 6)
    probe = client.post("/api/probes", json={"pool_id": pool_id, "model": yes_no_model, "k": 8,
                                             "max_new_tokens": 1, "seed": 1}).json()
    assert wait_for_job(client, probe["job_id"], timeout=300)["status"] == "succeeded"
    settings = {"model": yes_no_model, "lora_rank": 4, "lora_alpha": 8, "num_generations": 4, "batch_size": 4,
                "max_completion_length": 1, "learning_rate": 1e-2, "max_steps": 3, "eval_pool_id": held_out,
                "eval_samples": 8, "eval_temperature": 1.0}  # one sample per prompt, as the paper evaluates
    created = client.post("/api/experiments", json={"probe_id": probe["id"], "strategies": ["easy", "hard"],
                                                    "seeds": [3, 4], "budget": {"kind": "count", "value": 4},
                                                    "settings": settings})
    assert created.status_code == 201, created.text
    experiment = created.json()
    assert [(run["strategy"], run["seed"]) for run in experiment["runs"]] == [
        ("easy", 3), ("easy", 4), ("hard", 3), ("hard", 4)]
    assert experiment["seeds"] == [3, 4] and experiment["name"].endswith("2 strategies × 2 seeds")
    assert [run["settings"]["seed"] for run in experiment["runs"]] == [3, 4, 3, 4]
    with session_scope() as session:
        assert [session.get(Subset, run["subset_id"]).seed for run in experiment["runs"]] == [3, 4, 3, 4]
    experiment = wait_for_experiment(client, experiment["id"])
    assert experiment["status"] == "succeeded", [run["job"] for run in experiment["runs"]]

    for run in experiment["runs"]:  # sampled evaluations depend on the seed: each run measures its own base
        series = client.get(f"/api/runs/{run['id']}/metrics?keys=eval/accuracy,eval/base_from_run").json()["series"]
        assert series["eval/accuracy"]["steps"] == [0, 3] and "eval/base_from_run" not in series
    comparison = client.get(f"/api/experiments/{experiment['id']}/compare").json()
    rows = comparison["table"]
    assert [line["name"] for line in comparison["figures"]["eval_accuracy"]["data"]] == [
        "easy · seed 3", "easy · seed 4", "hard · seed 3", "hard · seed 4"]
    for summary in comparison["strategies"]:  # mean ± t(0.975, 1) · sd / √2 over the two seeds
        gains = [row["gain"] for row in rows if row["strategy"] == summary["strategy"]]
        assert summary["runs"] == 2 and summary["gain"] == pytest.approx(np.mean(gains))
        half = 12.706 * np.std(gains, ddof=1) / np.sqrt(2)
        assert summary["gain_interval"] == pytest.approx([np.mean(gains) - half, np.mean(gains) + half])
        finals = [row["final_accuracy"] for row in rows if row["strategy"] == summary["strategy"]]
        assert summary["final_accuracy"] == pytest.approx(np.mean(finals))


def test_cancel_an_experiment_mid_run(client, worker, service_tiny_model):

    probed = make_probed_pool(12, seed=4)
    experiment = client.post("/api/experiments", json={
        "probe_id": probed.probe_id, "strategies": ["hard", "random"], "budget": {"kind": "count", "value": 4},
        "settings": {**TINY, "max_steps": 400}}).json()
    first = experiment["runs"][0]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        steps = client.get(f"/api/runs/{first['id']}/metrics?keys=loss").json()["series"].get("loss", {})
        if steps and steps["steps"]:
            break
        time.sleep(0.3)
    else:
        raise AssertionError("the first run logged no step")
    response = client.post(f"/api/experiments/{experiment['id']}/cancel")
    assert response.status_code == 200
    second = response.json()["runs"][1]
    assert second["job"]["status"] == "cancelled"  # still queued: cancelled at once
    experiment = wait_for_experiment(client, experiment["id"], timeout=120)
    assert experiment["status"] == "cancelled"
    run = experiment["runs"][0]
    assert "cancelled: stopped after step" in run["job"]["message"] and "(metrics kept)" in run["job"]["message"]
    logged = client.get(f"/api/runs/{run['id']}/metrics?keys=loss").json()["series"]["loss"]["steps"]
    assert 1 <= len(logged) < 400  # it stopped early and kept what it logged
    assert not run["adapter_available"]
    assert client.get(f"/api/runs/{run['id']}/adapter").status_code == 409


def count_rows() -> tuple[int, int, int]:
    with session_scope() as session:
        return tuple(session.exec(select(func.count()).select_from(table)).one() for table in (Experiment, Subset, Run))


@pytest.mark.parametrize("body, status, words", [
    ({"strategies": ["hard", "hardest"]}, 422, "Unknown strategy 'hardest'; choose from: hard, easy"),
    ({"strategies": []}, 422, "No strategy chosen"),
    ({"strategies": ["hard", "hard"]}, 422, "listed twice"),
    ({"settings": {"batch_size": 3, "num_generations": 2}}, 422, "must be divisible by num_generations (2)"),
    ({"settings": {"model": "nope"}}, 422, "Unknown model"),
    ({"budget": {"kind": "fraction", "value": 2}}, 422, "fraction"),
    ({"seeds": [1, 1]}, 422, "list each seed once"),
    ({"seeds": [1, -2]}, 422, "seeds.1: Input should be greater than or equal to 0"),
    ({"seeds": [2**31]}, 422, "seeds.0: Input should be less than or equal to 2147483647"),
])
def test_bad_experiments_are_refused_and_write_nothing(client, body, status, words):
    probed = make_probed_pool(10, seed=5)
    request = {"probe_id": probed.probe_id, "budget": {"kind": "count", "value": 3}, **body}
    before = count_rows()
    response = client.post("/api/experiments", json=request)
    assert response.status_code == status, response.text
    assert words in response.json()["detail"]
    assert count_rows() == before
    if "allowed" in response.json().get("details", {}):
        assert "learnable" in response.json()["details"]["allowed"]


def test_unfinished_probe_and_pool_without_answers_are_409(client):
    unfinished = make_probed_pool(6, finished=False)
    unlabeled = make_probed_pool(6, label_free=True)
    before = count_rows()
    for probe_id, words in [(unfinished.probe_id, "has not finished"), (unlabeled.probe_id, "have no answer")]:
        response = client.post("/api/experiments", json={"probe_id": probe_id, "budget": {"kind": "count",
                                                                                          "value": 2}})
        assert response.status_code == 409 and words in response.json()["detail"], response.text
    assert count_rows() == before



def test_the_demo_experiment_is_one_request_on_a_probe_of_the_demo_pool(client):
    from backend.experiments.service import DEMO_COUNT, DEMO_STRATEGIES
    from backend.pools.demo import HELD_OUT_POOL_NAME
    from backend.runs.settings import PRESETS
    from tests.pools.test_browse import add_probe

    other = make_probed_pool(10, seed=5)
    before = count_rows()
    refused = client.post("/api/experiments/demo", json={"probe_id": other.probe_id})
    assert refused.status_code == 422 and "not of the demo pool" in refused.json()["detail"]
    assert count_rows() == before
    demo = client.post("/api/pools/demo").json()
    assert demo["is_demo"] and not client.get(f"/api/pools/{other.pool_id}").json()["is_demo"]
    probe_id = add_probe(demo["id"], "succeeded", {i: (i % 9) / 8 for i in range(200)})

    created = client.post("/api/experiments/demo", json={"probe_id": probe_id})
    assert created.status_code == 201, created.text
    experiment = created.json()
    assert experiment["strategies"] == DEMO_STRATEGIES == ["hard", "easy", "random", "learnable"]
    assert experiment["n"] == DEMO_COUNT and [run["strategy"] for run in experiment["runs"]] == DEMO_STRATEGIES
    settings = experiment["settings"]
    assert {key: settings[key] for key in PRESETS["demo_cpu"]} == PRESETS["demo_cpu"]
    held_out = client.get(f"/api/pools/{settings['eval_pool_id']}").json()  # created for it
    assert (held_out["name"], held_out["prompt_count"], held_out["is_demo"]) == (HELD_OUT_POOL_NAME, 180, False)
    assert settings["eval_samples"] == 180
    again = client.post("/api/experiments/demo", json={"probe_id": probe_id}).json()
    assert again["settings"]["eval_pool_id"] == held_out["id"]  # the held-out pool is reused
