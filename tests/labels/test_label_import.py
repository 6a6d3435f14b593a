"""Importing labels into a pool (issue 8 §3, §4): matched by external id, several annotators settled by
majority, history kept, undo, and the stored samples re-graded with no new generation. On Postgres
and on the embedded SQLite database, through the API."""

import io
import json

import pytest

from tests.labels.probed import K, make_label_free_probe


def upload(client, pool_id: int, content: str | bytes, name: str = "labels.csv", dry_run: bool = False):
    data = {"dry_run": "true"} if dry_run else {}
    body = content.encode() if isinstance(content, str) else content
    return client.post(f"/api/pools/{pool_id}/labels", files={"file": (name, io.BytesIO(body))}, data=data)


def csv_of(rows: dict[str, str]) -> str:
    return "id,answer\n" + "".join(f"{key},{value}\n" for key, value in rows.items())


def scores_by_external_id(client, probe) -> dict[str, dict]:
    out = {}
    for position, prompt_id in enumerate(probe.prompt_ids):
        detail = client.get(f"/api/probes/{probe.probe_id}/prompts/{prompt_id}/samples").json()
        out[f"q{position}"] = detail
    return out


def test_labels_turn_a_label_free_probe_into_a_graded_one(any_client):
    client = any_client
    probe = make_label_free_probe(20)
    # The true answer of q_i is str(i): the model gave it min(i mod 5, 4) times out of K.
    labeled = {f"q{i}": str(i) for i in range(10)}
    response = upload(client, probe.pool_id, csv_of(labeled))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["report"]["matched"] == 10 and body["report"]["new"] == 10 and body["report"]["changed"] == 0
    assert body["report"]["regraded"] == {"probes": 1, "samples": 10 * K}
    assert body["label_set"]["label_count"] == 10

    read = client.get(f"/api/probes/{probe.probe_id}").json()
    assert read["graded_prompts"] == 10 and read["label_free"] is True and read["scores_revision"] == 1
    details = scores_by_external_id(client, probe)
    for i in range(20):
        score, samples = details[f"q{i}"]["score"], details[f"q{i}"]["samples"]
        if i < 10:
            right = probe.correct(i, str(i))
            assert score["correct_count"] == right and score["pass_rate"] == right / K
            assert score["wilson_low"] <= score["pass_rate"] <= score["wilson_high"]
            assert [s["correct"] for s in samples] == [a == str(i) for a in probe.answers[i]]
            assert score["base_wrong"] is (probe.answers[i][0] != str(i))
            # Unlabeled prompts remain, so difficulty stays on the agreement scale for every prompt.
            assert score["difficulty"] == pytest.approx(1 - score["agreement"])
        else:
            assert score["pass_rate"] is None and all(s["correct"] is None for s in samples)

    labels = client.get(f"/api/pools/{probe.pool_id}/labels").json()
    assert (labels["labeled"], labels["unlabeled"], labels["imported_labels"]) == (10, 10, 10)
    assert client.get(f"/api/pools/{probe.pool_id}").json()["has_answers"] is False

    # The rest: every prompt graded, so the probe ranks by pass rate now.
    response = upload(client, probe.pool_id, csv_of({f"q{i}": str(i) for i in range(10, 20)}))
    assert response.status_code == 200, response.text
    read = client.get(f"/api/probes/{probe.probe_id}").json()
    assert read["label_free"] is False and read["graded_prompts"] == 20 and read["scores_revision"] == 2
    difficulty = client.get(f"/api/probes/{probe.probe_id}/difficulty").json()
    assert difficulty["metric"] == "pass_rate"
    assert client.get(f"/api/pools/{probe.pool_id}").json()["has_answers"] is True
    score = scores_by_external_id(client, probe)["q3"]["score"]
    assert score["difficulty"] == pytest.approx(1 - probe.correct(3, "3") / K)
    preview = client.post("/api/selections/preview", json={"probe_id": probe.probe_id, "strategy": "learnable",
                                                           "budget": {"kind": "count", "value": 5}})
    assert preview.status_code == 200, preview.text  # refused while label-free
    assert preview.json()["difficulty_basis"] == "pass_rate"


def test_history_and_undo(any_client):
    client = any_client
    probe = make_label_free_probe(10)
    first = upload(client, probe.pool_id, csv_of({"q1": "1", "q2": "2", "q3": "3"}), "first.csv").json()
    second = upload(client, probe.pool_id, csv_of({"q2": "0", "q3": "3"}), "second.csv").json()
    assert second["report"]["changed"] == 1 and second["report"]["unchanged"] == 1
    assert second["label_set"]["label_count"] == 2 and second["label_set"]["changed_count"] == 1
    q2 = probe.prompt_ids[2]

    def answer_of(prompt_id):
        return client.get(f"/api/probes/{probe.probe_id}/prompts/{prompt_id}/samples").json()["prompt"]["answer"]

    def pass_rate_of(prompt_id):
        return client.get(f"/api/probes/{probe.probe_id}/prompts/{prompt_id}/samples").json()["score"]["pass_rate"]

    assert answer_of(q2) == "0" and pass_rate_of(q2) == probe.correct(2, "0") / K
    # Undo the first import: q2 keeps the later answer and q3 the later confirmation; q1 loses its answer.
    undone = client.post(f"/api/label-sets/{first['label_set']['id']}/undo")
    assert undone.status_code == 200, undone.text
    assert undone.json()["report"] == {"restored": 1, "kept_later_answers": 2, "regraded": {"probes": 1,
                                                                                           "samples": 1 * K}}
    assert answer_of(q2) == "0" and answer_of(probe.prompt_ids[1]) is None
    assert answer_of(probe.prompt_ids[3]) == "3"
    assert pass_rate_of(probe.prompt_ids[1]) is None
    again = client.post(f"/api/label-sets/{first['label_set']['id']}/undo")
    assert again.status_code == 409 and "already undone" in again.json()["detail"]
    # Undo the second: q2 and q3 go back to what they had before it, which the first import's undo
    # handed down: no answer at all.
    client.post(f"/api/label-sets/{second['label_set']['id']}/undo").raise_for_status()
    assert answer_of(q2) is None and answer_of(probe.prompt_ids[3]) is None
    labels = client.get(f"/api/pools/{probe.pool_id}/labels").json()
    assert labels["labeled"] == 0 and [s["undone_at"] is not None for s in labels["label_sets"]] == [True, True]


def test_label_studio_export_with_several_annotators(client):
    probe = make_label_free_probe(6)

    def task(external_id, answers, cancelled=()):
        return {"id": hash(external_id) % 1000, "data": {"budgetlab_id": external_id, "prompt": "?"},
                "annotations": [{"id": n, "completed_by": n, "was_cancelled": n in cancelled,
                                 "result": [{"from_name": "answer", "to_name": "prompt", "type": "textarea",
                                             "value": {"text": [answer]}}]}
                                for n, answer in enumerate(answers, 1)]}

    export = [task("q1", ["1", "1", "7"]), task("q2", ["2", "5"]), task("q3", ["3.0", "3"]),
              task("q4", ["", "4"]), task("q5", ["five"]), task("nope", ["1"]), task("q0", ["9", "0"], cancelled=(1,))]
    response = upload(client, probe.pool_id, json.dumps(export), "project-1.json")
    assert response.status_code == 200, response.text
    report = response.json()["report"]
    assert report["disagreements"]["examples"] == [{"id": "q1", "answer": "1", "agreeing": 2, "annotations": 3}]
    assert report["ties"]["examples"] == [{"id": "q2", "answers": {"2": 1, "5": 1}}]
    assert report["unknown_ids"]["examples"] == ["nope"]
    assert report["empty_answers"]["count"] == 1 and report["ungradeable"]["examples"][0]["id"] == "q5"
    # q1 by majority, q3 ("3.0" and "3" agree as numbers), q4 (the empty one is not a vote), q0 (the
    # cancelled annotation is skipped); q2 tied: left for the manager.
    assert report["matched"] == 4 and response.json()["label_set"]["label_count"] == 4
    prompt = client.get(f"/api/probes/{probe.probe_id}/prompts/{probe.prompt_ids[2]}/samples").json()["prompt"]
    assert prompt["answer"] is None


def snapshot(client, probe) -> tuple:
    labels = client.get(f"/api/pools/{probe.pool_id}/labels").json()
    answers = [client.get(f"/api/probes/{probe.probe_id}/prompts/{p}/samples").json()["prompt"]["answer"]
               for p in probe.prompt_ids]
    return labels["labeled"], len(labels["label_sets"]), answers, client.get(f"/api/probes/{probe.probe_id}").json()[
        "scores_revision"]


@pytest.mark.parametrize(("name", "content", "words"), [
    ("other-pool.csv", "id,answer\nx1,1\nx2,2\n", ["None of the 2 ids", "another pool", "x1", "q0"]),
    ("labels.csv", "id,label\nq1,1\n", ["answer"]),
    ("labels.csv", "id,answer\nq1,1\nq1,2\n", ["q1"]),
    ("labels.json", '[{"id": "q1", "answer": "1"}, {"data": {"budgetlab_id": "q2"}, "annotations": []}]', ["mix"]),
    ("project.json", json.dumps([{"id": 1, "data": {"question": "?"}, "annotations": [
        {"result": [{"from_name": "answer", "type": "textarea", "value": {"text": ["1"]}}]}]}]), ["budgetlab_id"]),
    ("labels.csv", "id,answer\nq1,one\nq2,two\n", ["numeric", "'one'"]),
    ("labels.bin", b"\x00\x01\x02garbage", ["labels.bin"]),
])
def test_bad_files_are_refused_and_change_nothing(client, name, content, words):
    probe = make_label_free_probe(5)
    upload(client, probe.pool_id, csv_of({"q0": "0"})).raise_for_status()
    before = snapshot(client, probe)
    response = upload(client, probe.pool_id, content, name)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    for word in words:
        assert word.lower() in detail.lower(), detail
    assert "nothing" in detail.lower()
    assert snapshot(client, probe) == before


def test_dry_run_reports_and_changes_nothing(client):
    probe = make_label_free_probe(5)
    before = snapshot(client, probe)
    response = upload(client, probe.pool_id, csv_of({"q1": "1", "q2": "2"}), dry_run=True)
    assert response.status_code == 200 and response.json()["label_set"] is None
    assert response.json()["report"]["new"] == 2 and response.json()["report"]["dry_run"] is True
    assert snapshot(client, probe) == before


def test_import_waits_for_a_running_probe(client):
    probe = make_label_free_probe(5, finished=False)
    response = upload(client, probe.pool_id, csv_of({"q1": "1"}))
    assert response.status_code == 409 and "still running" in response.json()["detail"]


def test_money_spent_follows_the_labels_in_effect(client):
    probe = make_label_free_probe(5)
    first = upload(client, probe.pool_id, csv_of({"q1": "1", "q2": "2", "q3": "3"})).json()
    labels = client.put(f"/api/pools/{probe.pool_id}/labeling", json={"cost_per_label": 0.5}).json()
    assert labels["spent"] == 1.5 and labels["cost_per_label"] == 0.5
    client.post(f"/api/label-sets/{first['label_set']['id']}/undo").raise_for_status()
    assert client.get(f"/api/pools/{probe.pool_id}/labels").json()["spent"] == 0


def test_training_refuses_unlabeled_members_and_says_how_many(client):
    probe = make_label_free_probe(12)
    subset = client.post("/api/subsets", json={"probe_id": probe.probe_id, "strategy": "hard",
                                               "budget": {"kind": "count", "value": 6}}).json()
    members = [json.loads(line)["id"] for line in
               client.get(f"/api/subsets/{subset['id']}/export?format=jsonl").text.splitlines()]
    upload(client, probe.pool_id, csv_of({ext: ext[1:] for ext in members[:4]})).raise_for_status()
    settings = {"max_steps": 1, "model": "tiny-random-SmolLM2"}
    refused = client.post("/api/runs", json={"subset_id": subset["id"], "settings": settings})
    assert refused.status_code == 409, refused.text
    assert "2 of the 6 prompts" in refused.json()["detail"]
    upload(client, probe.pool_id, csv_of({ext: ext[1:] for ext in members[4:]})).raise_for_status()
    exported = [json.loads(line) for line in
                client.get(f"/api/subsets/{subset['id']}/export?format=jsonl").text.splitlines()]
    assert all(row["answer"] == row["id"][1:] for row in exported)


@pytest.mark.parametrize(("name", "content", "words"), [
    ("annotations.json", '[{"data": {"budgetlab_id": "q1"}, "annotations": 5}]', ["structure"]),
    ("deep.json", "[" * 100_000 + "]" * 100_000, ["structure", "RecursionError"]),
])
def test_malformed_structures_are_422_not_500(client, name, content, words):
    probe = make_label_free_probe(3)
    response = upload(client, probe.pool_id, content, name)
    assert response.status_code == 422, response.text
    assert all(word in response.json()["detail"] for word in words) and "Nothing was imported" in response.json()[
        "detail"]


def test_a_long_prompt_in_our_own_template_reads_back(client):
    probe = make_label_free_probe(3)
    long_text = "x" * 200_000
    response = upload(client, probe.pool_id, f'id,prompt,answer\nq1,"{long_text}",1\n', "to-label.csv")
    assert response.status_code == 200, response.text
    assert response.json()["report"]["matched"] == 1


def test_confirming_an_answer_keeps_it_when_the_first_import_is_undone(client):
    probe = make_label_free_probe(5)
    first = upload(client, probe.pool_id, csv_of({"q1": "1"})).json()
    second = upload(client, probe.pool_id, csv_of({"q1": "1"})).json()
    assert second["report"]["unchanged"] == 1 and second["label_set"]["label_count"] == 1
    undone = client.post(f"/api/label-sets/{first['label_set']['id']}/undo").json()
    assert undone["report"]["kept_later_answers"] == 1 and undone["report"]["restored"] == 0
    detail = client.get(f"/api/probes/{probe.probe_id}/prompts/{probe.prompt_ids[1]}/samples").json()
    assert detail["prompt"]["answer"] == "1" and detail["score"]["pass_rate"] == probe.correct(1, "1") / K


def test_regrade_on_request_repairs_scores(client):
    probe = make_label_free_probe(6)
    upload(client, probe.pool_id, csv_of({f"q{i}": str(i) for i in range(6)})).raise_for_status()
    from sqlalchemy import update

    from backend.database import session_scope
    from backend.probes.tables import PromptScore

    with session_scope() as session:  # scores left behind by a re-grading job that never ran
        session.execute(update(PromptScore).where(PromptScore.probe_id == probe.probe_id)
                        .values(pass_rate=None, correct_count=None))
    response = client.post(f"/api/pools/{probe.pool_id}/regrade")
    assert response.status_code == 200, response.text
    assert response.json()["report"]["regraded"] == {"probes": 1, "samples": 6 * K}
    detail = client.get(f"/api/probes/{probe.probe_id}/prompts/{probe.prompt_ids[4]}/samples").json()
    assert detail["score"]["pass_rate"] == probe.correct(4, "4") / K
