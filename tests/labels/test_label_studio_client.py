"""LabelStudioClient against a real Label Studio server (see label_studio_server.py)."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from backend.labels.label_studio import LabelStudioClient, LabelStudioError, is_personal_access_token
from tests.labels.label_studio_server import LABEL_STUDIO_VERSION, LabelStudioServer, free_port

TEXT_CONFIG = (
    '<View><Text name="prompt" value="$prompt"/>'
    '<TextArea name="answer" toName="prompt" maxSubmissions="1" required="true"/></View>'
)
PROMPTS = {"q1": "What is 2 + 2?", "q2": "Name a prime above 10.", "q3": "Spell 'budget' backwards."}


@pytest.fixture
def client(label_studio: LabelStudioServer):
    with LabelStudioClient(label_studio.url, label_studio.token) as client:
        yield client


def test_check_names_the_user_and_version(client: LabelStudioClient, label_studio: LabelStudioServer):
    assert client.check() == f"{label_studio.username} on Label Studio {LABEL_STUDIO_VERSION}"


def test_prompts_go_out_and_answers_come_back_in_the_json_export(
    client: LabelStudioClient, label_studio: LabelStudioServer
):
    project_id = client.create_project("budgetlab round trip", TEXT_CONFIG)
    assert client.project_url(project_id) == f"{label_studio.url}/projects/{project_id}/data"
    progress: list[tuple[int, int]] = []
    tasks = [{"data": {"budgetlab_id": key, "prompt": prompt}} for key, prompt in PROMPTS.items()]

    assert client.import_tasks(project_id, tasks, batch_size=2, on_progress=lambda *p: progress.append(p)) == 3
    assert progress == [(2, 3), (3, 3)]

    by_id = {task["data"]["budgetlab_id"]: task["id"] for task in label_studio.tasks(project_id)}
    assert sorted(by_id) == ["q1", "q2", "q3"]
    label_studio.submit_answer(by_id["q1"], "4", annotator="ann1@budgetlab.test")
    label_studio.submit_answer(by_id["q2"], "11", annotator="ann2@budgetlab.test")

    exported = json.loads(client.export_annotations(project_id))
    answers = {
        task["data"]["budgetlab_id"]: [
            (a["result"][0]["value"]["text"], a["completed_by"]) for a in task["annotations"]
        ]
        for task in exported
    }
    assert answers == {
        "q1": [(["4"], label_studio.annotator("ann1@budgetlab.test"))],
        "q2": [(["11"], label_studio.annotator("ann2@budgetlab.test"))],
    }  # q3 has no answer yet, and the JSON export leaves unanswered tasks out
    assert exported[0]["data"]["prompt"] == PROMPTS[exported[0]["data"]["budgetlab_id"]]


def test_personal_access_tokens_are_exchanged_for_bearer_tokens(label_studio: LabelStudioServer):
    token = label_studio.personal_access_token()
    assert is_personal_access_token(token) and not is_personal_access_token(label_studio.token)
    with LabelStudioClient(label_studio.url, token) as client:
        assert client.check().startswith(label_studio.username)
        assert client.create_project("made with a personal access token", TEXT_CONFIG) > 0


@pytest.mark.parametrize(
    "wrong_key",
    [
        "0123456789abcdef0123456789abcdef01234567",  # legacy shape
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ0b2tlbl90eXBlIjoicmVmcmVzaCJ9.bm90LXNpZ25lZA",  # JWT shape
    ],
)
def test_a_wrong_key_is_reported_without_echoing_it(label_studio: LabelStudioServer, wrong_key: str):
    with LabelStudioClient(label_studio.url, wrong_key) as client, pytest.raises(LabelStudioError) as error:
        client.check()
    assert "refused the API key (401)" in str(error.value)
    assert "Account & Settings" in str(error.value) and "Label Studio says: " in str(error.value)
    assert wrong_key not in str(error.value)


def test_a_closed_port_says_the_server_could_not_be_reached():
    url = f"http://127.0.0.1:{free_port()}"
    with LabelStudioClient(url, "secret-key-123456") as client, pytest.raises(LabelStudioError) as error:
        client.check()
    assert str(error.value) == (
        f"Could not reach Label Studio at {url}: connection refused; check that it is running and that the URL is "
        "right."
    )


def test_a_deleted_or_unknown_project_is_named_in_a_404(client: LabelStudioClient, label_studio: LabelStudioServer):
    project_id = client.create_project("to be deleted", TEXT_CONFIG)
    label_studio.delete_project(project_id)
    with pytest.raises(LabelStudioError, match=rf"has no project {project_id} \(404\); it may have been deleted"):
        client.import_tasks(project_id, [{"data": {"budgetlab_id": "q1", "prompt": "?"}}])
    with pytest.raises(LabelStudioError, match=r"has no project 987654 \(404\)"):
        client.export_annotations(987654)


def test_a_bad_label_config_gives_label_studios_reason(client: LabelStudioClient):
    with pytest.raises(LabelStudioError, match=r"answered 400 to POST /api/projects/: .*label_config"):
        client.create_project("broken", "<View><TextArea name='answer' toName='nowhere'/></View>")


def test_a_page_that_is_not_label_studio_is_reported_as_not_json():
    class LoginPage(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>Sign in</title>")

        def log_message(self, *args):
            pass

    page = HTTPServer(("127.0.0.1", 0), LoginPage)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{page.server_port}"
        with LabelStudioClient(url, "secret-key-123456") as client, pytest.raises(LabelStudioError) as error:
            client.check()
    finally:
        page.shutdown()
    assert "answered with text/html, not JSON" in str(error.value)
    # Nothing of the page is echoed: a URL must not turn into a way to read other servers' pages.
    assert "doctype" not in str(error.value) and "Sign in" not in str(error.value)
    assert "secret-key-123456" not in str(error.value)


def test_a_server_that_never_answers_times_out_with_a_clear_message():
    with socket.socket() as silent:  # listens, so connecting works, but never accepts or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with LabelStudioClient(url, "secret-key-123456", timeout=0.5) as client, pytest.raises(LabelStudioError) as e:
            client.check()
    assert str(e.value).startswith(f"Label Studio at {url} did not answer GET /api/current-user/whoami within 0.5 s")
