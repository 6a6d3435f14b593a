"""create_run: validation in words and the rows it writes."""

import pytest

from backend.database import session_scope
from backend.errors import AppError
from backend.jobs.tables import Job
from backend.runs.service import create_run
from tests.runs.conftest import make_subset


def test_create_run_writes_a_queued_train_job_and_the_full_settings(service_env):
    subset_id = make_subset()
    with session_scope() as session:
        run = create_run(session, subset_id, {"model": "tiny-random-SmolLM2", "max_steps": 3, "seed": 7})
        job = session.get(Job, run.job_id)
        assert (job.kind, job.status, job.progress_total) == ("train", "queued", 3)
        assert run.settings["lora_rank"] == 32 and run.settings["max_steps"] == 3 and run.seed == 7
        assert run.model == "tiny-random-SmolLM2"


def test_subset_without_answers_is_409(service_env):
    subset_id = make_subset(label_free=True)
    with session_scope() as session, pytest.raises(AppError) as caught:
        create_run(session, subset_id, {})
    assert caught.value.status_code == 409 and "answer" in caught.value.message


def test_bad_settings_are_422_with_the_rule(service_env):
    subset_id = make_subset()
    with session_scope() as session, pytest.raises(AppError) as caught:
        create_run(session, subset_id, {"num_generations": 1})
    assert caught.value.status_code == 422 and "num_generations = 1" in caught.value.message


def test_unknown_model_is_422_with_the_list(service_env):
    subset_id = make_subset()
    with session_scope() as session, pytest.raises(AppError) as caught:
        create_run(session, subset_id, {"model": "no-such-model"})
    assert caught.value.status_code == 422 and "SmolLM2-135M-Instruct" in caught.value.message


def test_missing_subset_is_404(service_env):
    with session_scope() as session, pytest.raises(AppError) as caught:
        create_run(session, 10**9, {})
    assert caught.value.status_code == 404
