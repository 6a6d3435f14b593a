import pytest

from backend.experiments.statistics import accuracy_interval, bootstrap_fit, difference_interval, excludes_zero


def test_accuracy_interval_is_wilsons():
    low, high = accuracy_interval(0.5, 100)
    assert (round(low, 4), round(high, 4)) == (0.4038, 0.5962)
    assert accuracy_interval(0.0, 30)[0] == 0.0 and accuracy_interval(0.0, 30)[1] > 0.1  # not collapsed at 0


def test_difference_interval_matches_newcombes_worked_example():
    # Newcombe (1998), Statistics in Medicine 17:873, example (a): 56/70 vs 48/80, method 10: 0.0524 to 0.3339.
    low, high = difference_interval(48 / 80, 80, 56 / 70, 70)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)
    assert excludes_zero((low, high))
    assert not excludes_zero(difference_interval(0.30, 60, 0.35, 60))


def test_bootstrap_fit_intervals():
    xs = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    exact = bootstrap_fit(xs, [0.01 * x for x in xs])
    assert exact["r2"] == pytest.approx((1.0, 1.0)) and exact["slope"] == pytest.approx((0.01, 0.01))
    noisy = bootstrap_fit(xs, [0.3, 0.1, 0.5, 0.2, 0.6, 0.1, 0.4, 0.2, 0.5, 0.3])
    assert noisy["r2"][0] < 0.05 and noisy["r2"][1] < 0.9  # unrelated points: no longer an interval up to 1
    assert noisy["slope"][0] < 0 < noisy["slope"][1]
    # Below 8 points resamples of few distinct x fit exactly: no interval rather than a meaningless one.
    assert bootstrap_fit(xs[:7], [0.3, 0.1, 0.5, 0.2, 0.6, 0.1, 0.4]) == {"r2": None, "slope": None}


def test_mean_interval_over_seeds():
    from backend.experiments.statistics import mean_interval

    assert mean_interval([0.3]) == (0.3, None)
    mean, (low, high) = mean_interval([0.1, 0.2, 0.3])
    # mean 0.2, sd 0.1, t(0.975, 2) = 4.303: 0.2 ± 4.303 · 0.1 / √3
    assert mean == pytest.approx(0.2) and (low, high) == pytest.approx((0.2 - 0.24844, 0.2 + 0.24844), abs=1e-4)
    assert mean_interval([0.25, 0.25])[1] == pytest.approx((0.25, 0.25))
