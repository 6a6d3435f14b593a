import math
from fractions import Fraction

import numpy as np
import pytest

from backend.curation.forecast import (
    compare_picks,
    compare_strategies,
    forecast_subset,
    learnable_chance,
    share_forecast,
)
from backend.curation.posterior import (
    UNIFORM,
    BetaPrior,
    PassCounts,
    fit_prior,
    learnable_chance_posterior,
)
from backend.curation.strategies import STRATEGIES, Selector, StrategyError, select


def test_learnable_chance_by_hand():
    p = np.array([0.0, 0.5, 1.0, 0.25])
    # G = 2: 1 - p^2 - (1-p)^2 = 2p(1-p)
    np.testing.assert_allclose(learnable_chance(p, 2), [0.0, 0.5, 0.0, 0.375])
    # G = 8 at p = 1/2: 1 - 2/256
    assert learnable_chance(np.array([0.5]), 8)[0] == pytest.approx(0.9921875)
    assert learnable_chance(np.array([0.1]), 3)[0] == pytest.approx(1 - 0.001 - 0.729)


def test_share_forecast_by_hand_and_of_nothing():
    forecast = share_forecast(np.array([0.2, 0.6]), np.array([0.01, 0.03]))
    half_width = 1.959963984540054 * math.sqrt(0.04) / 2
    assert forecast.share == pytest.approx(0.4)
    assert (forecast.low, forecast.high) == pytest.approx((0.4 - half_width, 0.4 + half_width))
    assert share_forecast(np.array([0.99]), np.array([0.04])).high == 1.0  # clipped to [0, 1]
    assert share_forecast(np.array([]), np.array([])).share == 0.0


def test_group_size_must_be_at_least_two():
    with pytest.raises(StrategyError):
        learnable_chance(np.array([0.5]), 1)


def test_compare_strategies_by_hand():
    difficulty = np.array([0.0, 0.0, 1.0, 1.0, 0.5, 0.5])
    base_wrong = np.array([False, False, True, True, True, False])
    rows = {row["strategy"]: row for row in compare_strategies(difficulty, base_wrong, 2, 0, 2, (0.4, 0.6))}
    assert list(rows) == list(STRATEGIES)
    assert rows["hard"] == {  # pass rates given as exact (no counts): the exact chance, no spread
        "strategy": "hard",
        "n_picked": 2,
        "predicted_learnable_share": 0.0,
        "predicted_learnable_share_low": 0.0,
        "predicted_learnable_share_high": 0.0,
        "mean_pass_rate": 0.0,
        "mean_agreement": None,
        "mean_difficulty": 1.0,
        "overlap_with_hard": 1.0,
    }
    assert rows["easy"]["mean_pass_rate"] == 1.0 and rows["easy"]["overlap_with_hard"] == 0.0
    assert rows["learnable"]["predicted_learnable_share"] == pytest.approx(0.5)  # both p = 0.5, G = 2
    assert rows["band"]["mean_pass_rate"] == 0.5
    assert rows["medium"]["n_picked"] == 2 and rows["medium"]["mean_difficulty"] == 0.5


def test_compare_rows_agree_with_the_picks():
    rng = np.random.default_rng(3)
    difficulty = 1.0 - rng.integers(0, 11, 400) / 10
    base_wrong = rng.random(400) < 0.3
    rows = compare_strategies(difficulty, base_wrong, 60, 5, 8, (0.1, 0.9))
    hard = set(select("hard", difficulty=difficulty, base_wrong=base_wrong, n=60, seed=5))
    for row in rows:
        picked = select(row["strategy"], difficulty=difficulty, base_wrong=base_wrong, n=60, seed=5)
        assert row["n_picked"] == len(picked)
        assert row["mean_pass_rate"] == pytest.approx(np.mean(1.0 - difficulty[picked]))
        assert row["mean_difficulty"] == pytest.approx(np.mean(difficulty[picked]))
        assert row["predicted_learnable_share"] == pytest.approx(
            np.mean(1 - (1 - difficulty[picked]) ** 8 - difficulty[picked] ** 8)
        )
        assert row["overlap_with_hard"] == pytest.approx(len(hard & set(picked)) / len(picked))
        assert 0.0 <= row["overlap_with_hard"] <= 1.0


def test_a_strategy_that_picks_nothing_has_no_means():
    difficulty = np.array([0.0, 1.0])
    rows = {row["strategy"]: row for row in compare_strategies(difficulty, np.zeros(2, bool), 1, 0)}
    assert rows["band"]["n_picked"] == 0 and rows["base_wrong"]["n_picked"] == 0
    assert rows["band"]["predicted_learnable_share"] == 0.0
    assert rows["band"]["mean_pass_rate"] is None and rows["band"]["overlap_with_hard"] is None


def test_a_million_prompt_comparison_runs():
    rng = np.random.default_rng(0)
    size = 1_000_000
    correct = rng.binomial(10, rng.beta(0.6, 0.9, size))
    difficulty = 1.0 - correct / 10
    base_wrong = rng.random(size) < 0.5
    selector = Selector(difficulty, base_wrong, seed=7, counts=PassCounts.of(correct, np.full(size, 10)))
    rows = compare_picks(selector, 100_000)
    assert [row["n_picked"] for row in rows] == [size if s == "all" else 100_000 for s in STRATEGIES]
    by_strategy = {row["strategy"]: row for row in rows}
    assert by_strategy["hard"]["overlap_with_hard"] == 1.0
    assert by_strategy["hard"]["mean_difficulty"] > by_strategy["random"]["mean_difficulty"]
    assert by_strategy["learnable"]["predicted_learnable_share"] >= max(
        row["predicted_learnable_share"] for row in rows
    )


def test_learnable_chance_matches_pow_for_many_group_sizes():
    p = np.random.default_rng(1).random(1000)
    original = p.copy()
    for group_size in range(2, 40):
        np.testing.assert_allclose(
            learnable_chance(p, group_size), 1 - p**group_size - (1 - p) ** group_size, rtol=1e-12, atol=1e-15
        )
    np.testing.assert_array_equal(p, original)  # the input is not modified


# --- The posterior-predictive forecast (issue 7 §8: the plug-in forecast was biased against hard) ---

G = 8
RATES = (0.02, 0.1, 0.3, 0.5, 0.9)


def beta_power(a: Fraction, b: Fraction, n: int) -> Fraction:
    """E[p^n] under Beta(a, b), as an exact fraction."""
    return math.prod((a + j) / (a + b + j) for j in range(n))


def test_posterior_chance_of_0_of_8_under_a_uniform_prior_is_the_exact_beta_moment():
    mean, _ = learnable_chance_posterior(PassCounts.of([0, 3, 8], [8, 8, 8]), G, UNIFORM)
    for m, c in zip(mean, (0, 3, 8), strict=True):
        a, b = Fraction(1 + c), Fraction(1 + 8 - c)
        assert m == pytest.approx(float(1 - beta_power(a, b, G) - beta_power(b, a, G)), rel=1e-12)
    assert mean[0] == pytest.approx(0.4705, abs=1e-4)  # the "after 0/8 a uniform prior gives 0.47"


def test_posterior_variance_matches_numerical_integration():
    prior = BetaPrior(0.7, 2.3, fitted=True)
    mean, variance = learnable_chance_posterior(PassCounts.of([1, 5], [10, 12]), G, prior)
    p = np.linspace(0.0, 1.0, 400_001)[1:-1]
    for m, v, (c, k) in zip(mean, variance, ((1, 10), (5, 12)), strict=True):
        a, b = prior.a + c, prior.b + k - c
        density = np.exp((a - 1) * np.log(p) + (b - 1) * np.log1p(-p)
                         - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)))
        chance = 1 - p**G - (1 - p) ** G
        assert m == pytest.approx(np.trapezoid(chance * density, p), abs=1e-6)
        assert v == pytest.approx(np.trapezoid((chance - m) ** 2 * density, p), abs=1e-6)


def test_prior_fit_recovers_a_beta_pool_and_falls_back_to_uniform_when_degenerate():
    rng = np.random.default_rng(4)
    p = rng.beta(0.8, 2.4, 20_000)
    prior = fit_prior(PassCounts.of(rng.binomial(10, p), np.full(p.size, 10)))
    assert prior.fitted and prior.a == pytest.approx(0.8, rel=0.1) and prior.b == pytest.approx(2.4, rel=0.1)
    assert fit_prior(PassCounts.of([3], [8])) == UNIFORM  # one prompt cannot show a spread
    assert fit_prior(PassCounts.of([0, 0, 0], [8, 8, 8])) == UNIFORM  # ML would say p = 0: never mixed
    assert fit_prior(PassCounts.of([4, 4], [4, 4])) == UNIFORM


def simulate(rates, k: int, draws: int = 50, size: int = 2000, seed: int = 0):
    """Yield (true p, correct counts) for ``draws`` pools of ``size`` prompts, rates in equal shares."""
    rng = np.random.default_rng(seed)
    for _ in range(draws):
        p = rng.permutation(np.repeat(np.asarray(rates, dtype=np.float64), size // len(rates)))
        yield p, rng.binomial(k, p)


def forecast_errors(rates, k: int, pick=None, seed: int = 0):
    """Mean over simulated pools of (forecast - truth) for the posterior and for the old plug-in
    c/k, over the whole pool or over the prompts ``pick(selector)`` returns."""
    posterior, plug_in = [], []
    for p, correct in simulate(rates, k, seed=seed):
        size = p.size
        selector = Selector(1.0 - correct / k, np.zeros(size, bool), seed=1,
                            counts=PassCounts.of(correct, np.full(size, k)))
        picked = np.arange(size) if pick is None else pick(selector)
        truth = learnable_chance(p[picked], G).mean()
        posterior.append(forecast_subset(selector, picked, G).share - truth)
        plug_in.append(learnable_chance(correct[picked] / k, G).mean() - truth)
    return float(np.mean(posterior)), float(np.mean(plug_in))


@pytest.mark.parametrize("k", [4, 8, 16])
@pytest.mark.parametrize("rates", [(p,) for p in RATES] + [RATES], ids=[*map(str, RATES), "mixture"])
def test_pool_forecast_mean_error_is_below_002(rates, k):
    posterior, _ = forecast_errors(rates, k)
    assert abs(posterior) < 0.02


def test_the_old_plug_in_forecast_misses_by_far_more_at_p_01():
    # Exactly, over Binomial(8, 0.1): the plug-in averages 0.42 where the truth is 0.57.
    truth = 1 - 0.1**G - 0.9**G
    plug_in = sum(math.comb(8, c) * 0.1**c * 0.9 ** (8 - c) * (1 - (c / 8) ** G - (1 - c / 8) ** G)
                  for c in range(9))
    assert truth == pytest.approx(0.5695, abs=1e-4) and plug_in == pytest.approx(0.4223, abs=1e-4)
    posterior, simulated_plug_in = forecast_errors((0.1,), 8)
    assert simulated_plug_in < -0.14 and abs(posterior) < 0.02


def hard_tenth(selector):
    return selector.pick("hard", selector.eligible // 10)


@pytest.mark.parametrize("k", [4, 8, 16])
@pytest.mark.parametrize("p", RATES)
def test_hard_subset_forecast_of_a_single_rate_pool(p, k):
    # Picking by c conditions on it: the posterior mean given c stays right, the plug-in says 0.
    posterior, plug_in = forecast_errors((p,), k, hard_tenth)
    assert abs(posterior) < 0.02
    assert abs(plug_in) > abs(posterior)


@pytest.mark.parametrize("k", [4, 8, 16])
def test_hard_subset_forecast_of_the_mixture_pool(k):
    # A 5-point mixture is no Beta: the fitted prior spreads mass the pool does not have, so the
    # hard tenth (mostly 0/k, a blend of p = 0.02, 0.1 and 0.3) keeps a bias of 0.04 to 0.06.
    # Still a fraction of the plug-in's, which forecasts 0 for each of those prompts.
    posterior, plug_in = forecast_errors(RATES, k, hard_tenth)
    assert abs(posterior) < 0.07 and plug_in < -0.2 and abs(posterior) < abs(plug_in) / 3


def test_interval_covers_the_truth_about_95_percent_of_the_time():
    # Well-specified pools (p ~ Beta): the hard tenth's true share lies in the interval ~95% of draws.
    rng = np.random.default_rng(11)
    covered = []
    for _ in range(200):
        p = rng.beta(0.5, 1.2, 400)
        correct = rng.binomial(8, p)
        selector = Selector(1.0 - correct / 8, np.zeros(400, bool), seed=2,
                            counts=PassCounts.of(correct, np.full(400, 8)))
        picked = hard_tenth(selector)
        forecast = forecast_subset(selector, picked, G)
        covered.append(forecast.low <= learnable_chance(p[picked], G).mean() <= forecast.high)
    assert 0.88 <= np.mean(covered) <= 0.99


# --- Label-free probes: agreement is not a success rate ---


def label_free_selector():
    rng = np.random.default_rng(6)
    agreement = rng.integers(1, 9, 50) / 8
    return Selector(1.0 - agreement, rng.random(50) < 0.3, seed=0, label_free=True), agreement


def test_label_free_comparison_reports_agreement_and_no_forecast():
    selector, agreement = label_free_selector()
    rows = compare_picks(selector, 10)
    assert [row["strategy"] for row in rows] == ["hard", "easy", "medium", "random", "base_wrong", "base_right", "all"]
    for row in rows:
        picked = selector.pick(row["strategy"], 10)
        assert row["predicted_learnable_share"] is None and row["predicted_learnable_share_low"] is None
        assert row["mean_pass_rate"] is None
        assert row["mean_agreement"] == pytest.approx(agreement[picked].mean())
    assert forecast_subset(selector, selector.pick("hard", 10), G) is None
