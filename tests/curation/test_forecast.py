import numpy as np
import pytest

from backend.curation.forecast import (
    compare_picks,
    compare_strategies,
    learnable_chance,
    predicted_learnable_share,
)
from backend.curation.strategies import STRATEGIES, Selector, StrategyError, select


def test_learnable_chance_by_hand():
    p = np.array([0.0, 0.5, 1.0, 0.25])
    # G = 2: 1 - p^2 - (1-p)^2 = 2p(1-p)
    np.testing.assert_allclose(learnable_chance(p, 2), [0.0, 0.5, 0.0, 0.375])
    # G = 8 at p = 1/2: 1 - 2/256
    assert learnable_chance(np.array([0.5]), 8)[0] == pytest.approx(0.9921875)
    assert learnable_chance(np.array([0.1]), 3)[0] == pytest.approx(1 - 0.001 - 0.729)
    assert predicted_learnable_share(p, 2) == pytest.approx((0.5 + 0.375) / 4)


def test_predicted_learnable_share_of_nothing_is_zero():
    assert predicted_learnable_share(np.array([]), 8) == 0.0


def test_group_size_must_be_at_least_two():
    with pytest.raises(StrategyError):
        learnable_chance(np.array([0.5]), 1)


def test_compare_strategies_by_hand():
    difficulty = np.array([0.0, 0.0, 1.0, 1.0, 0.5, 0.5])
    base_wrong = np.array([False, False, True, True, True, False])
    rows = {row["strategy"]: row for row in compare_strategies(difficulty, base_wrong, 2, 0, 2, (0.4, 0.6))}
    assert list(rows) == list(STRATEGIES)
    assert rows["hard"] == {
        "strategy": "hard",
        "n_picked": 2,
        "predicted_learnable_share": 0.0,
        "mean_pass_rate": 0.0,
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
    difficulty = 1.0 - rng.binomial(10, 0.4, size) / 10
    base_wrong = rng.random(size) < 0.5
    selector = Selector(difficulty, base_wrong, seed=7)
    rows = compare_picks(selector, 100_000)
    assert [row["n_picked"] for row in rows] == [100_000] * len(STRATEGIES)
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
