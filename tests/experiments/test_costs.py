import pytest

from backend.experiments.costs import strategy_cost

BASE = {"labels": 30, "price_per_label": 0.5, "probe_samples": 1600, "probe_max_new_tokens": 16,
        "probe_samples_per_second": 10.0, "training_seconds": 200.0, "gain": 0.2, "device": "cpu"}


def test_a_probed_strategy_pays_labels_probe_and_training():
    cost = strategy_cost(strategy="hard", **BASE)
    assert cost["label_cost"] == 15.0 and cost["probe_samples"] == 1600 and cost["probe_tokens_at_most"] == 25_600
    assert cost["probe_seconds"] == 160.0 and cost["compute_hours"] == pytest.approx(360 / 3600)
    assert cost["gain_per_label_cost"] == pytest.approx(0.2 / 15)
    assert cost["gain_per_compute_hour"] == pytest.approx(2.0)


def test_random_and_all_pick_without_the_probe():
    for strategy in ("random", "all"):
        cost = strategy_cost(strategy=strategy, **BASE)
        assert cost["probe_samples"] == 0 and cost["probe_seconds"] == 0.0
        assert cost["compute_hours"] == pytest.approx(200 / 3600)


def test_unknown_prices_and_times_give_none_not_zero():
    cost = strategy_cost(strategy="hard", **{**BASE, "price_per_label": None, "probe_samples_per_second": None})
    assert cost["label_cost"] is None and cost["gain_per_label_cost"] is None
    assert cost["probe_seconds"] is None and cost["compute_hours"] is None and cost["gain_per_compute_hour"] is None
