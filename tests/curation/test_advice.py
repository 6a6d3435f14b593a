from backend.curation.advice import regime_advice


def summary(mean, never, always, count=100):
    return {"mean": mean, "share_at_0": never, "share_at_1": always, "count": count}


def test_a_weak_model_is_beyond_reach_and_the_prediction_names_the_better_strategy():
    advice = regime_advice(summary(0.1, 0.7, 0.0), {"hard": 0.05, "easy": 0.6, "learnable": 0.8, "all": 0.9})
    assert advice["regime"] == "beyond_reach"
    assert "hard 5%, learnable 80%" in advice["profile"]  # all is a baseline, never the recommendation
    assert "Limits of Difficulty Scaling" in advice["prediction"] and "learnable" in advice["prediction"]
    assert advice["test"].startswith("A prediction, not a verdict")


def test_hard_within_reach_and_a_saturated_pool():
    within = regime_advice(summary(0.4, 0.2, 0.1), {"hard": 0.45, "easy": 0.3, "learnable": 0.9})
    assert within["regime"] == "within_reach" and "Hard Examples Are All You Need" in within["prediction"]
    saturated = regime_advice(summary(0.9, 0.0, 0.7), {"hard": 0.6, "easy": 0.0, "learnable": 0.7})
    assert saturated["regime"] == "saturated" and "easy picks are always solved" in saturated["prediction"]


def test_no_advice_without_pass_rates():
    assert regime_advice({"mean": None, "share_at_0": None, "share_at_1": None, "count": 0}, {"hard": None}) is None
    assert regime_advice(summary(0.5, 0.1, 0.1), {"hard": None}) is None


def test_a_model_that_solves_almost_nothing_is_beyond_reach_whatever_the_forecast():
    # With every count 0 of k the forecast rests on the fitted prior; the counts themselves say "never".
    advice = regime_advice(summary(0.0, 1.0, 0.0), {"hard": 0.6, "learnable": 0.6})
    assert advice["regime"] == "beyond_reach"
