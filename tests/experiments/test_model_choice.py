"""An experiment trains the model its probe measured difficulty with, unless another is explicitly allowed
(issue 7 §8)."""

import pytest

from backend.database import session_scope
from backend.errors import AppError
from backend.experiments.schemas import ExperimentCreate
from backend.experiments.service import create_experiment, experiment_read
from tests.subsets.conftest import make_probed_pool

BUDGET = {"kind": "count", "value": 3}


def experiment(probe_id: int, **fields):
    with session_scope() as session:
        created, runs = create_experiment(session, ExperimentCreate(
            probe_id=probe_id, budget=BUDGET, strategies=["hard", "easy"], preset="quick_cpu", **fields))
        return experiment_read(session, created)


def test_an_experiment_trains_the_probes_model(service_env):
    read = experiment(make_probed_pool(10).probe_id)  # probed with the tiny model; quick_cpu names none
    assert read.settings["model"] == read.probe_model == "tiny-random-SmolLM2"
    assert [run.model for run in read.runs] == ["tiny-random-SmolLM2"] * 2
    assert read.forecast_applies and all(run.forecast_applies for run in read.runs)


def test_another_model_is_refused_unless_allowed_and_then_flagged(service_env):
    probe_id = make_probed_pool(10).probe_id
    with pytest.raises(AppError) as caught:
        experiment(probe_id, settings={"model": "SmolLM2-135M-Instruct"})
    assert caught.value.status_code == 422 and "allow_other_model" in caught.value.message
    read = experiment(probe_id, settings={"model": "SmolLM2-135M-Instruct"}, allow_other_model=True)
    assert [run.model for run in read.runs] == ["SmolLM2-135M-Instruct"] * 2
    assert not read.forecast_applies and "probed with 'tiny-random-SmolLM2'" in read.forecast_caveats[0]
