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


# --- training is tied to the probed model and its grading (issue 7 §8) ----------------------------------


@pytest.mark.parametrize("preset", [None, "quick_cpu", "paper"])
def test_a_run_trains_the_model_its_subset_was_probed_with(service_env, preset):
    from backend.runs.schemas import RunRead

    subset_id = make_subset()  # probed with the tiny model, not the default one
    with session_scope() as session:
        run = create_run(session, subset_id, {"max_steps": 2}, preset=preset)
        read = RunRead.of(session, run)
        assert run.model == run.settings["model"] == "tiny-random-SmolLM2"
        assert read.probe_model == "tiny-random-SmolLM2"
    if preset != "paper":  # the paper preset grades strictly, the probe leniently: see below
        assert read.forecast_applies and read.forecast_caveats == []


def test_another_model_needs_an_explicit_choice_and_is_flagged(service_env):
    from backend.runs.schemas import RunRead

    subset_id = make_subset()
    with session_scope() as session, pytest.raises(AppError) as caught:
        create_run(session, subset_id, {"model": "SmolLM2-135M-Instruct"})
    assert caught.value.status_code == 422
    assert "tiny-random-SmolLM2" in caught.value.message and "allow_other_model" in caught.value.message
    with session_scope() as session:
        run = create_run(session, subset_id, {"model": "SmolLM2-135M-Instruct"}, allow_other_model=True)
        read = RunRead.of(session, run)
    assert run.model == "SmolLM2-135M-Instruct"
    assert not read.forecast_applies and read.probe_model == "tiny-random-SmolLM2"
    assert "probed with 'tiny-random-SmolLM2'" in read.forecast_caveats[0]


def test_the_grading_policy_defaults_to_the_probe_and_paper_is_strict(service_env):
    from backend.runs.schemas import RunRead

    strict_subset = make_subset(grading_policy="strict", template="Q: {prompt}\nA:")
    with session_scope() as session:
        run = create_run(session, strict_subset, {"max_steps": 2}, preset="quick_cpu")
        read = RunRead.of(session, run)
    assert run.settings["grading_policy"] == read.grading_policy == "strict" and read.forecast_applies
    assert read.template == "Q: {prompt}\nA:"

    lenient_subset = make_subset()  # probes are lenient unless asked otherwise
    with session_scope() as session:
        run = create_run(session, lenient_subset, {"max_steps": 2}, preset="paper")
        read = RunRead.of(session, run)
    assert run.settings["grading_policy"] == "strict"
    assert not read.forecast_applies and "graded lenient" in read.forecast_caveats[0]
