"""SQLite: a big upload stages its rows and holds the database's write lock only at its end, so workers'
beats and other writers go on meanwhile, and the half-uploaded pool is seen by no one."""

import json
import threading
import time

import pytest

from tests.conftest import client_on
from tests.pools.conftest import upload
from tests.pools.test_sqlite import sqlite_counts
from tests.pools.test_streaming import multipart, post_chunked


@pytest.fixture
def sqlite_client(app, tmp_path, monkeypatch):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'budgetlab.db'}", "BUDGETLAB_DATA_DIR": str(tmp_path)}
    with client_on(app, monkeypatch, env) as client:
        yield client


def big_pool(rows: int) -> bytes:
    return "".join(json.dumps({"id": f"q{i}", "question": f"What is {i} plus {i}? Think it through, then answer.",
                               "answer": f"#### {2 * i}"}) + "\n" for i in range(rows)).encode()


def queued_job() -> int:
    from backend.database import session_scope
    from backend.jobs.service import create_job

    with session_scope() as session:
        return create_job(session, "probe").id


def start_job(job_id: int) -> float:
    """A worker's read-check-write (lock the job, start it); the seconds it took."""
    from backend.database import session_scope
    from backend.jobs.service import lock_job, transition
    from backend.jobs.tables import JobStatus

    started = time.monotonic()
    with session_scope() as session:
        transition(session, lock_job(session, job_id), JobStatus.running, "claimed")
    return time.monotonic() - started


def test_others_write_while_an_upload_is_half_staged(sqlite_client, monkeypatch):
    from backend.pools import service

    rows = 30_000
    halfway, go_on = threading.Event(), threading.Event()
    original = service._StagedPromptWriter.write
    batches = []

    def write_then_pause(self, batch):
        original(self, batch)
        batches.append(len(batch))
        if len(batches) == 2:  # 10,000 rows staged: stop here until the test has looked
            halfway.set()
            go_on.wait(timeout=60)

    monkeypatch.setattr(service._StagedPromptWriter, "write", write_then_pause)
    job_id = queued_job()
    before = sqlite_counts()
    responses = []
    uploader = threading.Thread(target=lambda: responses.append(
        upload(sqlite_client, "big.jsonl", big_pool(rows), preset="gsm8k", id_field="id", name="big")))
    uploader.start()
    try:
        assert halfway.wait(timeout=60)
        assert start_job(job_id) < 2  # not stuck behind the upload (that would be busy_timeout, 30 s, then fail)
        assert [p["name"] for p in sqlite_client.get("/api/pools").json()] == []
        assert sqlite_counts() == before  # nothing of the upload in the database file yet
    finally:
        go_on.set()
        uploader.join(timeout=120)
    response = responses[0]
    assert response.status_code == 201, response.text
    assert response.json()["prompt_count"] == rows
    assert [p["name"] for p in sqlite_client.get("/api/pools").json()] == ["big"]
    assert sqlite_counts() == (before[0] + 1, before[1] + rows)
    page = sqlite_client.get(f"/api/pools/{response.json()['id']}/prompts", params={"offset": rows - 1}).json()
    assert (page["items"][0]["external_id"], page["items"][0]["gold"]) == (f"q{rows - 1}", str(2 * (rows - 1)))


def test_writers_wait_only_for_the_last_step_of_a_big_upload(sqlite_client, capsys):
    """Without staging a writer waits for the whole import; with it, for the final copy (~6 µs a row)."""
    rows = 60_000
    job_id = queued_job()
    content = big_pool(rows)
    done = threading.Event()
    waits: list[float] = []

    def beat() -> None:  # a worker's beat every 20 ms: a short writing unit
        from sqlalchemy import update

        from backend.database import session_scope
        from backend.jobs.tables import Job

        while not done.is_set():
            started = time.monotonic()
            with session_scope() as session:
                session.execute(update(Job).where(Job.id == job_id).values(message=f"beat at {started:.3f}"))
            waits.append(time.monotonic() - started)
            time.sleep(0.02)

    beater = threading.Thread(target=beat)
    beater.start()
    started = time.monotonic()
    try:
        response = upload(sqlite_client, "big.jsonl", content, preset="gsm8k", id_field="id")
    finally:
        upload_seconds = time.monotonic() - started
        done.set()
        beater.join(timeout=60)
    assert response.status_code == 201 and response.json()["prompt_count"] == rows
    with capsys.disabled():
        print(f"\nupload of {rows} rows: {upload_seconds:.2f} s; {len(waits)} beats, the longest waited "
              f"{max(waits):.3f} s")
    assert max(waits) < upload_seconds / 2


def test_a_rejected_upload_leaves_nothing_and_the_next_one_works(sqlite_client):
    before = sqlite_counts()
    content = big_pool(12_000) + b'{"id": "q5", "question": "again", "answer": "#### 1"}\n'
    response = upload(sqlite_client, "dup.jsonl", content, preset="gsm8k", id_field="id")
    assert response.status_code == 422 and "line 6 and line 12001" in response.json()["detail"]
    assert sqlite_counts() == before
    response = upload(sqlite_client, "ok.jsonl", big_pool(100), preset="gsm8k", id_field="id")
    assert response.status_code == 201 and sqlite_counts() == (before[0] + 1, before[1] + 100)


def test_options_after_the_file_redo_the_staged_import(app, sqlite_client):
    before = sqlite_counts()
    rows = "".join(json.dumps({"question": f"q{i}", "answer": str(i)}) + "\n" for i in range(50)).encode()
    body = multipart([("file", rows, "pool.jsonl"), ("prompt_field", "question", None),
                      ("task_type", "exact", None), ("answer_field", "answer", None)])
    response = post_chunked(app, body, chunk=100)
    assert response.status_code == 201, response.text
    assert (response.json()["prompt_count"], response.json()["has_answers"]) == (50, True)
    assert sqlite_counts() == (before[0] + 1, before[1] + 50)
