from backend.curation.advice import regime_advice


def summary(mean, never, always, count=100):
    return {"mean": mean, "share_at_0": never, "share_at_1": always, "count": count}


def rows(**picks):
    """strategy=(predicted learnable share, mean pass rate of the pick)"""
    return [{"strategy": s, "predicted_learnable_share": share, "mean_pass_rate": rate}
            for s, (share, rate) in picks.items()]


def test_a_weak_model_is_beyond_reach_and_the_prediction_names_the_better_strategy():
    advice = regime_advice(summary(0.1, 0.7, 0.0), rows(hard=(0.05, 0.0), easy=(0.6, 0.5), learnable=(0.8, 0.4),
                                                        all=(0.9, 0.1)))
    assert advice["regime"] == "beyond_reach"
    assert "hard 5%, learnable 80%" in advice["profile"]  # all is a baseline, never the recommendation
    assert "Limits of Difficulty Scaling" in advice["prediction"] and "learnable" in advice["prediction"]
    assert advice["test"].startswith("A prediction, not a verdict")


def test_the_demo_pool_is_within_reach_without_claiming_what_the_counts_deny():
    # The demo walkthrough's numbers: hard picks all 0 of 8, forecast 0.35 from the pool's profile; easy 0.96.
    advice = regime_advice(summary(0.20, 0.36, 0.0), rows(hard=(0.35, 0.0), easy=(0.96, 0.7), random=(0.59, 0.2),
                                                          learnable=(0.96, 0.5)))
    assert advice["regime"] == "within_reach"
    assert "never solved in k samples" in advice["prediction"] and "sometimes solves even" not in advice["prediction"]
    assert "easy gains least" not in advice["prediction"]  # easy's forecast is above hard's


def test_hard_within_reach_and_a_saturated_pool():
    within = regime_advice(summary(0.4, 0.2, 0.1), rows(hard=(0.45, 0.1), easy=(0.3, 0.9), learnable=(0.9, 0.5)))
    assert within["regime"] == "within_reach" and "Hard Examples Are All You Need" in within["prediction"]
    assert "mean pass rate 0.10" in within["prediction"] and "easy gains least" in within["prediction"]
    saturated = regime_advice(summary(0.9, 0.0, 0.7), rows(hard=(0.6, 0.3), easy=(0.0, 1.0), learnable=(0.7, 0.5)))
    assert saturated["regime"] == "saturated" and "easy picks are always solved" in saturated["prediction"]


def test_no_advice_without_pass_rates():
    empty = {"mean": None, "share_at_0": None, "share_at_1": None, "count": 0}
    assert regime_advice(empty, rows(hard=(None, None))) is None
    assert regime_advice(summary(0.5, 0.1, 0.1), rows(hard=(None, None))) is None


def test_a_model_that_solves_almost_nothing_is_beyond_reach_whatever_the_forecast():
    # With every count 0 of k the forecast rests on the fitted prior; the counts themselves say "never".
    advice = regime_advice(summary(0.0, 1.0, 0.0), rows(hard=(0.6, 0.0), learnable=(0.6, 0.0)))
    assert advice["regime"] == "beyond_reach"
