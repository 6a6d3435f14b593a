"""The comparison's numbers: least squares and R² against numpy, run summaries from metric series."""

import numpy as np
import pytest

from backend.experiments.comparison import linear_fit, running_mean, steps_to_reach, summarize_run


def numpy_fit(xs, ys):
    """Independent: numpy's polynomial fit, and R² as the squared Pearson correlation (simple regression)."""
    slope, intercept = np.polyfit(xs, ys, 1)
    r2 = np.corrcoef(xs, ys)[0, 1] ** 2
    return slope, intercept, r2


@pytest.mark.parametrize("seed", range(20))
def test_fit_matches_numpy_on_random_data(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 30))
    xs = rng.uniform(0, 100, n)
    ys = 0.004 * xs + rng.normal(0, rng.uniform(0.01, 0.5), n)
    fit = linear_fit(list(xs), list(ys))
    slope, intercept, r2 = numpy_fit(xs, ys)
    assert fit.slope == pytest.approx(slope, rel=1e-9, abs=1e-12)
    assert fit.intercept == pytest.approx(intercept, rel=1e-9, abs=1e-12)
    assert fit.r2 == pytest.approx(r2, rel=1e-9, abs=1e-12)
    assert fit.n_points == n


def test_perfect_line_has_r2_one_and_a_bad_fit_can_be_negative_never():
    fit = linear_fit([0, 10, 20, 30], [0.1, 0.2, 0.3, 0.4])
    assert fit.slope == pytest.approx(0.01) and fit.intercept == pytest.approx(0.1) and fit.r2 == pytest.approx(1)
    noisy = linear_fit([0, 1, 2, 3], [1, -1, 1, -1])
    assert 0 <= noisy.r2 < 0.5  # least squares with an intercept: R² is in [0, 1]


def test_undefined_parts_are_none():
    assert linear_fit([], []).slope is None
    assert linear_fit([5.0], [0.1]).r2 is None
    same_x = linear_fit([50, 50, 50], [0.1, 0.2, 0.3])
    assert (same_x.slope, same_x.r2, same_x.n_points) == (None, None, 3)
    flat_y = linear_fit([10, 20, 30], [0.2, 0.2, 0.2])
    assert flat_y.slope == 0 and flat_y.r2 is None
    with pytest.raises(ValueError):
        linear_fit([1, 2], [1])


def test_summary_of_a_run():
    series = {
        "eval/accuracy": {"steps": [0, 2, 4], "values": [0.25, 0.5, 0.75]},
        "learnable_share": {"steps": [1, 2, 3, 4], "values": [0.0, 1.0, 0.5, 1.0]},
    }
    summary = summarize_run(series)
    assert (summary.base_accuracy, summary.final_accuracy) == (0.25, 0.75)
    assert summary.gain == pytest.approx(0.5)
    assert summary.learnable_pct == pytest.approx(75.0)  # 3 of 4 steps had a group with mixed rewards
    assert summary.measured_learnable_share == pytest.approx(0.625)
    assert summary.steps == 4


def test_summary_without_evaluation_or_steps():
    summary = summarize_run({"eval/accuracy": {"steps": [0], "values": [0.3]}})
    assert summary.base_accuracy == 0.3 and summary.final_accuracy is None and summary.gain is None
    assert summary.learnable_pct is None and summary.measured_learnable_share is None


def test_running_mean():
    assert running_mean([1, 0, 1, 1]) == pytest.approx([1, 0.5, 2 / 3, 0.75])
    assert running_mean([]) == []


def test_steps_to_reach_is_the_first_evaluated_step_at_the_target():
    series = {"eval/accuracy": {"steps": [0, 10, 20, 30], "values": [0.5, 0.4, 0.62, 0.7]}}
    assert steps_to_reach(series, 0.95 * 0.65) == 20  # step 0 (the base model) never counts
    assert steps_to_reach(series, 0.9) is None and steps_to_reach({}, 0.1) is None


def test_best_accuracy_is_the_highest_after_step_0():
    summary = summarize_run({"eval/accuracy": {"steps": [0, 5, 10], "values": [0.9, 0.4, 0.3]}})
    assert (summary.best_accuracy, summary.final_accuracy) == (0.4, 0.3)  # step 0 (the base) is not a result
