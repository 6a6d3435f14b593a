import pytest

from backend.errors import AppError
from backend.jobs.service import create_job, events, request_cancel, transition
from backend.jobs.tables import JobStatus as S


def test_transitions_record_events_with_reasons(db_session):
    job = create_job(db_session, "probe", total=10)
    transition(db_session, job, S.running, "shard 0 started")
    transition(db_session, job, S.succeeded, "all shards done")
    assert job.status == "succeeded" and job.finished_at is not None and job.started_at is not None
    assert [(e.from_status, e.to_status, e.reason) for e in events(db_session, job.id)] == [
        (None, "queued", "created"), ("queued", "running", "shard 0 started"),
        ("running", "succeeded", "all shards done")]


def test_finished_job_cannot_move(db_session):
    job = create_job(db_session, "probe")
    transition(db_session, job, S.running, "start")
    transition(db_session, job, S.failed, "boom", error="model could not load")
    with pytest.raises(AppError) as exc:
        transition(db_session, job, S.running, "again")
    assert exc.value.status_code == 409 and "failed" in exc.value.message
    assert job.error == "model could not load"


def test_cancel_queued_is_immediate_running_is_cooperative_finished_is_409(db_session):
    queued = create_job(db_session, "probe")
    assert request_cancel(db_session, queued).status == "cancelled"
    running = create_job(db_session, "probe")
    transition(db_session, running, S.running, "start")
    assert request_cancel(db_session, running).status == "cancelling"
    transition(db_session, running, S.cancelled, "stopped between batches")
    with pytest.raises(AppError) as exc:
        request_cancel(db_session, running)
    assert exc.value.status_code == 409


def test_unauthenticated_requests_are_401_except_health(client):
    anonymous = {"Authorization": ""}
    assert client.get("/api/health", headers=anonymous).status_code == 200
    for path in ("/api/jobs", "/api/pools", "/api/models", "/api/subsets"):
        assert client.get(path, headers=anonymous).status_code == 401, path
        response = client.get(path, headers={"Authorization": "Bearer wrong-token"})
        assert response.status_code == 401 and "Invalid credentials" in response.json()["detail"]


def test_cancel_unknown_job_is_404(client):
    response = client.post("/api/jobs/999999/cancel")
    assert response.status_code == 404 and "Job 999999 does not exist" in response.json()["detail"]
