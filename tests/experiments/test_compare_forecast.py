"""The comparison table carries each subset's step-0 learnable-share forecast with its 95% interval, read
from the frozen subset, before any run has trained (no worker: the runs stay queued)."""

from backend.database import session_scope
from backend.experiments.schemas import ExperimentCreate
from backend.experiments.service import create_experiment
from backend.subsets.tables import Subset
from tests.subsets.conftest import make_probed_pool

BUDGET = {"kind": "count", "value": 6}


def compare_rows(client, probe_id: int, strategies: list[str]) -> list[dict]:
    with session_scope() as session:
        experiment, _ = create_experiment(session, ExperimentCreate(
            probe_id=probe_id, budget=BUDGET, strategies=strategies, preset="quick_cpu"))
        experiment_id = experiment.id
    response = client.get(f"/api/experiments/{experiment_id}/compare")
    assert response.status_code == 200, response.text
    return response.json()["table"]


def test_compare_rows_carry_the_frozen_forecast_and_its_interval(client):
    rows = compare_rows(client, make_probed_pool(30).probe_id, ["hard", "medium", "easy"])
    assert [row["strategy"] for row in rows] == ["hard", "medium", "easy"]
    for row in rows:
        subset = client.get(f"/api/subsets/{row['subset_id']}").json()
        for key in ("predicted_learnable_share", "predicted_learnable_share_low", "predicted_learnable_share_high"):
            assert row[key] == subset[key] and row[key] is not None, key
        assert row["predicted_learnable_share_low"] <= row["predicted_learnable_share"] <= \
            row["predicted_learnable_share_high"]
        assert row["measured_learnable_share"] is None  # nothing trained yet


def test_a_subset_frozen_before_the_interval_existed_has_a_share_and_a_null_interval(client):
    # Label-free pools cannot train (no gold answers), so in this table a null interval means a subset frozen
    # before migration 0007 recorded it: the columns are null there while the share is set.
    rows = compare_rows(client, make_probed_pool(30).probe_id, ["hard"])
    with session_scope() as session:
        subset = session.get(Subset, rows[0]["subset_id"])
        subset.predicted_learnable_share_low = subset.predicted_learnable_share_high = None
        session.add(subset)
    experiment_id = rows[0]["experiment_id"]
    [row] = client.get(f"/api/experiments/{experiment_id}/compare").json()["table"]
    assert row["predicted_learnable_share"] == rows[0]["predicted_learnable_share"] is not None
    assert row["predicted_learnable_share_low"] is None and row["predicted_learnable_share_high"] is None
