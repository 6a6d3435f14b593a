"""Exports for labeling (issue 8 §1), the CLI's labels commands (§6), re-grading in a job with a real
worker when it is large (§4), and the trust report (§5)."""

import csv
import io
import json
import uuid
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
from typer.testing import CliRunner

from backend.cli import app as cli
from tests.conftest import wait_for_job
from tests.labels.probed import K, make_label_free_probe
from tests.labels.test_label_import import csv_of, upload


def freeze_hard(client, probe_id: int, n: int) -> dict:
    response = client.post("/api/subsets", json={"probe_id": probe_id, "strategy": "hard",
                                                 "budget": {"kind": "count", "value": n}})
    assert response.status_code == 201, response.text
    return response.json()


def members(client, subset_id: int) -> list[str]:
    return [json.loads(line)["id"] for line in
            client.get(f"/api/subsets/{subset_id}/export?format=jsonl").text.splitlines()]


def test_every_format_carries_the_subsets_prompts_and_is_recorded(client):
    probe = make_label_free_probe(12)
    subset = freeze_hard(client, probe.probe_id, 5)
    ids = members(client, subset["id"])

    tasks = client.get(f"/api/subsets/{subset['id']}/labeling-export?format=label-studio")
    assert tasks.status_code == 200 and "label-studio-tasks.json" in tasks.headers["content-disposition"]
    assert [task["data"]["budgetlab_id"] for task in tasks.json()] == ids
    config = ET.fromstring(client.get(f"/api/subsets/{subset['id']}/labeling-export?format=label-studio-config").text)
    assert config.find(".//TextArea").get("name") == "answer"  # a numeric pool: a text answer
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/subsets/{subset['id']}/labeling-export?format=csv").text)))
    assert [row["id"] for row in rows] == ids and all(row["answer"] == "" for row in rows)
    jsonl = client.get(f"/api/subsets/{subset['id']}/labeling-export?format=jsonl").text.splitlines()
    assert [json.loads(line)["id"] for line in jsonl] == ids
    archive = zipfile.ZipFile(io.BytesIO(client.get(f"/api/subsets/{subset['id']}/labeling-export?format=argilla")
                                         .content))
    records = json.loads(archive.read(next(n for n in archive.namelist() if n.endswith("records.json"))))
    assert len(records) == len(ids)

    labels = client.get(f"/api/pools/{probe.pool_id}/labels").json()
    # The config sends no prompt, so four exports are recorded, newest first.
    assert [e["format"] for e in labels["exports"]] == ["argilla", "jsonl", "csv", "label-studio"]
    assert all(e["subset_id"] == subset["id"] and e["prompt_count"] == 5 for e in labels["exports"])


def test_a_preview_exports_without_freezing(client):
    probe = make_label_free_probe(12)
    request = {"probe_id": probe.probe_id, "strategy": "hard", "budget": {"kind": "count", "value": 4}}
    preview = client.post("/api/selections/preview", json=request).json()
    exported = client.post("/api/selections/labeling-export", json={**request, "format": "csv"})
    assert exported.status_code == 200, exported.text
    ids = [row["id"] for row in csv.DictReader(io.StringIO(exported.text))]
    assert ids == [p["external_id"] for p in preview["prompts"]]
    assert client.get(f"/api/pools/{probe.pool_id}/labels").json()["exports"][0]["subset_id"] is None


def test_cli_exports_imports_and_undoes(service_env, tmp_path):
    probe = make_label_free_probe(10)
    runner = CliRunner()
    from backend.database import session_scope
    from backend.subsets.schemas import SubsetCreate
    from backend.subsets.service import freeze

    with session_scope() as session:
        subset_id = freeze(session, SubsetCreate(probe_id=probe.probe_id, strategy="hard",
                                                 budget={"kind": "count", "value": 3})).id
    out = tmp_path / "to-label.csv"
    result = runner.invoke(cli, ["labels", "export", str(subset_id), "--format", "csv", "--output", str(out)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 3
    labeled = tmp_path / "labeled.csv"
    labeled.write_text(csv_of({row["id"]: row["id"][1:] for row in rows} | {"zzz": "1"}))
    result = runner.invoke(cli, ["labels", "import", str(probe.pool_id), str(labeled)])
    assert result.exit_code == 0, result.output
    assert "3 prompts matched (3 new" in result.output and "1 ids not in this pool" in result.output
    label_set = int(result.output.split("Label set ", 1)[1].split(":", 1)[0])
    result = runner.invoke(cli, ["labels", "undo", str(label_set)])
    assert result.exit_code == 0 and "3 answers restored" in result.output, result.output
    bad = tmp_path / "bad.csv"
    bad.write_text("id,label\nq1,1\n")
    result = runner.invoke(cli, ["labels", "import", str(probe.pool_id), str(bad)])
    assert result.exit_code == 1 and "answer" in result.output and "Nothing was imported" in result.output


def test_a_large_regrade_runs_as_a_job_with_progress(client, worker, monkeypatch):
    from backend.settings import get_settings

    probe = make_label_free_probe(30)
    monkeypatch.setenv("BUDGETLAB_REGRADE_INLINE_SAMPLES", str(10 * K))  # 30 prompts x K samples is "large"
    get_settings.cache_clear()
    try:
        response = upload(client, probe.pool_id, csv_of({f"q{i}": str(i) for i in range(30)}))
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert response.status_code == 200, response.text
    job_id = response.json()["report"]["regrade_job_id"]
    assert "regraded" not in response.json()["report"]
    job = wait_for_job(client, job_id, timeout=120)
    assert job["status"] == "succeeded", job
    assert job["progress_done"] == job["progress_total"] == 30 * K
    read = client.get(f"/api/probes/{probe.probe_id}").json()
    assert read["graded_prompts"] == 30 and read["label_free"] is False
    detail = client.get(f"/api/probes/{probe.probe_id}/prompts/{probe.prompt_ids[7]}/samples").json()
    assert detail["score"]["pass_rate"] == probe.correct(7, "7") / K


def test_trust_report_from_the_probe_or_a_comparable_one(client):
    model = f"trust-{uuid.uuid4().hex[:8]}"  # no other test's probe has the same settings
    labeled = make_label_free_probe(40, model=model, name="labeled")
    other = make_label_free_probe(40, model=model, name="unlabeled")
    refused = client.get(f"/api/probes/{other.probe_id}/trust")
    assert refused.status_code == 409 and "0 prompts with gold answers" in refused.json()["detail"]

    # Answers that make pass rate follow agreement: q_i's answer is the model's majority answer.
    upload(client, labeled.pool_id, csv_of({f"q{i}": str(i) if i % 5 >= 3 else "0" for i in range(40)}))
    own = client.get(f"/api/probes/{labeled.probe_id}/trust?n=8")
    assert own.status_code == 200, own.text
    report = own.json()
    assert report["source_probe_id"] == labeled.probe_id and not report["comparable"]
    assert report["prompts"] == 40 and report["n"] == 8
    assert report["rho"] == 1.0 and report["rho_low"] <= report["rho"] <= report["rho_high"]
    assert report["recall"] == report["best_recall"] > report["chance_recall"]
    assert report["warning"] is None and report["figure"]["data"][0]["type"] == "scatter"

    borrowed = client.get(f"/api/probes/{other.probe_id}/trust?fraction=0.25").json()
    assert borrowed["comparable"] and borrowed["source_probe_id"] == labeled.probe_id and borrowed["n"] == 10

    # Answers that disagree with the model's majority everywhere: agreement says nothing of pass rate.
    rng = np.random.default_rng(0)
    noise = make_label_free_probe(40, model=model, name="noise")
    upload(client, noise.pool_id, csv_of({f"q{i}": str(int(rng.integers(0, 40))) for i in range(40)}))
    warned = client.get(f"/api/probes/{noise.probe_id}/trust").json()
    assert warned["rho"] is None or warned["rho"] < 0.4
    assert warned["warning"] or warned["note"]
