"""The live hand-off (issue 8 §2) against a real Label Studio server from PyPI, in its own virtual
environment: save the connection, send a subset (a job on a real worker), annotate through Label
Studio's API as annotators would, pull the labels back, and see the probe graded. Then the server
unreachable and the key refused: the jobs fail with a message to act on, and nothing changes."""

import pytest
from sqlmodel import select

from backend.database import session_scope
from backend.labels.tables import LabelStudioConnection
from tests.conftest import wait_for_job
from tests.labels.label_studio_server import free_port
from tests.labels.probed import K, make_label_free_probe


def _set_connection(**fields) -> None:
    """Change the saved connection behind the API's back: the server moved, or its key was revoked."""
    with session_scope() as session:
        row = session.exec(select(LabelStudioConnection)).one()
        for name, value in fields.items():
            setattr(row, name, value)
        session.add(row)


@pytest.fixture
def connected(client, label_studio):
    saved = client.put("/api/label-studio", json={"url": label_studio.url, "api_key": label_studio.token})
    assert saved.status_code == 200, saved.text
    yield label_studio
    client.delete("/api/label-studio")


def test_connection_is_checked_and_its_key_never_returned(client, label_studio):
    refused = client.put("/api/label-studio", json={"url": label_studio.url, "api_key": "not-a-token"})
    assert refused.status_code == 422 and "401" in refused.json()["detail"]
    assert "not-a-token" not in refused.text and "Nothing was saved" in refused.json()["detail"]
    down = client.put("/api/label-studio", json={"url": f"http://127.0.0.1:{free_port()}", "api_key": "x"})
    assert down.status_code == 422 and "could not reach" in down.json()["detail"].lower()
    assert client.get("/api/label-studio").json()["configured"] is False

    saved = client.put("/api/label-studio", json={"url": label_studio.url + "/", "api_key": label_studio.token})
    assert saved.status_code == 200 and saved.json() == {**saved.json(), "configured": True, "url": label_studio.url}
    for response in (saved, client.get("/api/label-studio")):
        assert label_studio.token not in response.text
    client.delete("/api/label-studio")


def test_send_annotate_pull_grades_the_probe(client, worker, connected):
    server = connected
    probe = make_label_free_probe(12)
    subset = client.post("/api/subsets", json={"probe_id": probe.probe_id, "strategy": "hard",
                                               "budget": {"kind": "count", "value": 6}}).json()

    pushed = client.post(f"/api/subsets/{subset['id']}/label-studio/push")
    assert pushed.status_code == 202, pushed.text
    job = wait_for_job(client, pushed.json()["id"], timeout=120)
    assert job["status"] == "succeeded", job
    assert job["progress_done"] == job["progress_total"] == 6
    export = client.get(f"/api/pools/{probe.pool_id}/labels").json()["exports"][0]
    assert export["format"] == "label-studio-project" and export["prompt_count"] == 6
    tasks = server.tasks(export["label_studio_project_id"])
    assert len(tasks) == 6

    # Annotators at work: the true answer of q_i is str(i). On one task two of three annotators agree
    # and the third is wrong; on another two annotators tie; the rest have one annotation each.
    by_id = {task["data"]["budgetlab_id"]: task["id"] for task in tasks}
    (majority, tied, *rest) = sorted(by_id)
    for external_id in rest:
        server.submit_answer(by_id[external_id], external_id[1:])
    server.submit_answer(by_id[majority], majority[1:], annotator="ann1@example.com")
    server.submit_answer(by_id[majority], majority[1:], annotator="ann2@example.com")
    server.submit_answer(by_id[majority], "999", annotator="ann3@example.com")
    server.submit_answer(by_id[tied], tied[1:], annotator="ann1@example.com")
    server.submit_answer(by_id[tied], "999", annotator="ann2@example.com")

    pulled = client.post(f"/api/subsets/{subset['id']}/label-studio/pull")
    job = wait_for_job(client, pulled.json()["id"], timeout=120)
    assert job["status"] == "succeeded", job
    labels = client.get(f"/api/pools/{probe.pool_id}/labels").json()
    assert labels["labeled"] == 5 and labels["label_sets"][0]["source"].startswith("Label Studio project")
    report = labels["label_sets"][0]["report"]
    assert report["disagreements"]["examples"] == [{"id": majority, "answer": majority[1:], "agreeing": 2,
                                                    "annotations": 3}]
    assert [tie["id"] for tie in report["ties"]["examples"]] == [tied]
    for external_id in [majority, *rest]:
        position = int(external_id[1:])
        detail = client.get(f"/api/probes/{probe.probe_id}/prompts/{probe.prompt_ids[position]}/samples").json()
        assert detail["score"]["pass_rate"] == probe.correct(position, external_id[1:]) / K
    assert client.get(f"/api/probes/{probe.probe_id}").json()["graded_prompts"] == 5

    # Label Studio goes away, then comes back with the key revoked: each pull fails saying why, and
    # the labels stay as they are.
    before = client.get(f"/api/pools/{probe.pool_id}/labels").json()
    _set_connection(url=f"http://127.0.0.1:{free_port()}")
    job = wait_for_job(client, client.post(f"/api/subsets/{subset['id']}/label-studio/pull").json()["id"], 60)
    assert job["status"] == "failed" and "could not reach" in job["error"].lower()
    _set_connection(url=server.url, api_key="revoked-key")
    job = wait_for_job(client, client.post(f"/api/subsets/{subset['id']}/label-studio/pull").json()["id"], 60)
    assert job["status"] == "failed" and "401" in job["error"] and "revoked-key" not in job["error"]
    assert client.get(f"/api/pools/{probe.pool_id}/labels").json() == before


def test_pull_before_push_and_push_without_a_server_say_what_to_do(client, label_studio):
    probe = make_label_free_probe(6)
    subset = client.post("/api/subsets", json={"probe_id": probe.probe_id, "strategy": "hard",
                                               "budget": {"kind": "count", "value": 3}}).json()
    refused = client.post(f"/api/subsets/{subset['id']}/label-studio/push")
    assert refused.status_code == 409 and "No Label Studio server is configured" in refused.json()["detail"]


def test_cli_connect_push_pull(service_env, label_studio):
    from typer.testing import CliRunner

    from backend.cli import app as cli
    from backend.database import session_scope
    from backend.subsets.schemas import SubsetCreate
    from backend.subsets.service import freeze

    probe = make_label_free_probe(8)
    with session_scope() as session:
        subset_id = freeze(session, SubsetCreate(probe_id=probe.probe_id, strategy="hard",
                                                 budget={"kind": "count", "value": 3})).id
    runner = CliRunner()
    result = runner.invoke(cli, ["labels", "connect", label_studio.url, "--api-key", label_studio.token])
    assert result.exit_code == 0 and label_studio.token not in result.output, result.output
    try:
        result = runner.invoke(cli, ["labels", "push", str(subset_id)])
        assert result.exit_code == 0 and "Sent 3 prompts to http://127.0.0.1" in result.output, result.output
        project_id = int(result.output.rsplit("/projects/", 1)[1].split("/", 1)[0])
        for task in label_studio.tasks(project_id):
            label_studio.submit_answer(task["id"], task["data"]["budgetlab_id"][1:])
        result = runner.invoke(cli, ["labels", "pull", str(subset_id)])
        assert result.exit_code == 0 and "3 prompts matched (3 new" in result.output, result.output
        assert "Label set" in result.output
    finally:
        with session_scope() as session:
            from backend.labels.connection import delete_connection

            delete_connection(session)


@pytest.mark.parametrize(("url", "key", "words"), [
    ("http://169.254.169.254/latest", "k", "link-local"),
    ("http://[::1", "k", "must start with http:// or https:// and name a host"),
    ("ftp://127.0.0.1", "k", "must start with http:// or https://"),
    ("http://127.0.0.1:9", "clé", "characters no Label Studio token has"),
])
def test_connection_settings_that_cannot_work_are_refused_before_any_request(client, url, key, words):
    response = client.put("/api/label-studio", json={"url": url, "api_key": key})
    assert response.status_code == 422 and words in response.json()["detail"], response.text
    assert client.get("/api/label-studio").json()["configured"] is False
