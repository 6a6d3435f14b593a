from fractions import Fraction

import numpy as np
import pytest

from backend.curation.forecast import learnable_chance
from backend.curation.posterior import BetaPrior, PassCounts, fit_prior, learnable_chance_posterior
from backend.curation.strategies import (
    LEARNABLE_RESOLUTION,
    STRATEGIES,
    Selector,
    StrategyError,
    _Ranking,
    _stable_argsort,
    seeded_shuffle,
    select,
)


def discrete_pool(size: int, k: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Difficulties 1 - c/k as probing produces them: few distinct values, many ties."""
    rng = np.random.default_rng(seed)
    difficulty = 1.0 - rng.integers(0, k + 1, size) / k
    return difficulty, rng.random(size) < 0.4


def continuous_pool(size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random(size), rng.random(size) < 0.4


def pools():
    yield discrete_pool(60, seed=1)
    yield discrete_pool(200, k=4, seed=2)
    yield continuous_pool(80, seed=3)
    difficulty, base_wrong = continuous_pool(80, seed=4)
    difficulty[::7] = np.nan  # not probed
    yield difficulty, base_wrong
    yield dense_pool(150, seed=5)


def dense_pool(size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values closer than 1/65535, with ties: too dense for the 16-bit radix path."""
    rng = np.random.default_rng(seed)
    return 0.5 + rng.integers(-40, 40, size) * 1e-7, rng.random(size) < 0.4


def rounded(values: np.ndarray) -> np.ndarray:
    return np.rint(values * 1e12)


def reference_pick(strategy, difficulty, base_wrong, n, seed, group_size=8, band=(0.1, 0.9)):
    """Brute force from the definitions: rank in seeded-shuffle order with a stable sort.

    The shuffle itself is taken from the random strategy asked for the whole pool.
    """
    shuffle = select("random", difficulty=difficulty, base_wrong=base_wrong, n=difficulty.size, seed=seed)
    d = difficulty[shuffle]
    p = 1.0 - d
    if strategy == "hard":
        ranked = shuffle[np.argsort(-rounded(d), kind="stable")]
    elif strategy == "easy":
        ranked = shuffle[np.argsort(rounded(d), kind="stable")]
    elif strategy == "learnable":
        # exact rational chance at the pass rate rounded to 12 decimals, so only true ties tie
        rational = [Fraction(int(np.rint(value * 1e12)), 10**12) for value in p]
        chance = [1 - x**group_size - (1 - x) ** group_size for x in rational]
        ranked = shuffle[sorted(range(len(shuffle)), key=lambda i: (-chance[i], i))]
    elif strategy == "medium":
        ascending = shuffle[np.argsort(rounded(d), kind="stable")]
        n = min(n, len(ascending))
        start = (len(ascending) - n) // 2
        window = list(ascending[start : start + n])
        middle = (len(ascending) - 1) / 2
        ranks = range(start, start + n)
        return np.array(
            [i for _, _, i in sorted(zip([abs(r - middle) for r in ranks], ranks, window, strict=True))]
        )
    elif strategy == "base_wrong":
        ranked = shuffle[base_wrong[shuffle]]
    elif strategy == "base_right":
        ranked = shuffle[~base_wrong[shuffle]]
    elif strategy == "all":
        return shuffle  # every probed prompt, whatever N
    elif strategy == "band":
        lo, hi = band
        ranked = shuffle[(p >= lo - 1e-12) & (p <= hi + 1e-12)]
    else:
        ranked = shuffle
    return ranked[:n]


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "random"])
def test_every_strategy_matches_its_brute_force_definition(strategy):
    for difficulty, base_wrong in pools():
        probed = int(np.count_nonzero(~np.isnan(difficulty)))
        for n in (0, 1, 7, probed // 2, probed - 1, probed, probed + 5):
            for seed in (0, 1, 12345):
                for group_size, band in ((8, (0.1, 0.9)), (2, (0.3, 0.7))):
                    got = select(
                        strategy,
                        difficulty=difficulty,
                        base_wrong=base_wrong,
                        n=n,
                        seed=seed,
                        group_size=group_size,
                        band=band,
                    )
                    expected = reference_pick(strategy, difficulty, base_wrong, n, seed, group_size, band)
                    np.testing.assert_array_equal(got, expected)
                    assert got.dtype == np.int64


def test_hard_and_easy_picks_dominate_the_rest():
    difficulty, base_wrong = discrete_pool(300, seed=5)
    for n in (1, 30, 150, 299):
        hard = select("hard", difficulty=difficulty, base_wrong=base_wrong, n=n, seed=3)
        easy = select("easy", difficulty=difficulty, base_wrong=base_wrong, n=n, seed=3)
        rest_hard = np.setdiff1d(np.arange(300), hard)
        rest_easy = np.setdiff1d(np.arange(300), easy)
        assert len(set(hard)) == n and len(set(easy)) == n
        assert difficulty[hard].min() >= difficulty[rest_hard].max()
        assert difficulty[easy].max() <= difficulty[rest_easy].min()
        assert np.all(np.diff(difficulty[hard]) <= 0)  # pick order: hardest first
        assert np.all(np.diff(difficulty[easy]) >= 0)


def test_medium_is_the_window_around_the_median():
    difficulty, base_wrong = continuous_pool(101, seed=6)
    medium = select("medium", difficulty=difficulty, base_wrong=base_wrong, n=11, seed=0)
    assert sorted(difficulty[medium]) == sorted(difficulty)[45:56]
    assert difficulty[medium[0]] == np.median(difficulty)  # closest to the middle comes first


def test_learnable_picks_have_the_highest_mixed_reward_chance():
    difficulty, base_wrong = discrete_pool(200, seed=7)
    for group_size in (2, 8, 16):
        picked = select(
            "learnable", difficulty=difficulty, base_wrong=base_wrong, n=50, seed=1, group_size=group_size
        )
        chance = learnable_chance(1.0 - difficulty, group_size)
        rest = np.setdiff1d(np.arange(200), picked)
        assert chance[picked].min() >= chance[rest].max() - 1e-12


def test_sampling_strategies_only_pick_eligible_prompts():
    difficulty, base_wrong = discrete_pool(100, seed=8)
    wrong = select("base_wrong", difficulty=difficulty, base_wrong=base_wrong, n=1000, seed=2)
    assert sorted(wrong) == sorted(np.flatnonzero(base_wrong))  # all of them when fewer than N
    few = select("base_wrong", difficulty=difficulty, base_wrong=base_wrong, n=5, seed=2)
    assert len(few) == 5 and base_wrong[few].all()
    banded = select("band", difficulty=difficulty, base_wrong=base_wrong, n=1000, seed=2, band=(0.1, 0.9))
    pass_rate = 1.0 - difficulty
    eligible = np.flatnonzero((pass_rate > 0.1 - 1e-9) & (pass_rate < 0.9 + 1e-9))
    assert sorted(banded) == sorted(eligible)
    random_pick = select("random", difficulty=difficulty, base_wrong=base_wrong, n=40, seed=2)
    assert len(set(random_pick)) == 40 and random_pick.min() >= 0 and random_pick.max() < 100


def test_band_edges_survive_float_noise():
    difficulty = np.array([1 - 1 / 10, 1 - 9 / 10, 0.95, 0.05])  # p = 0.1, 0.9 (inexactly), 0.05, 0.95
    picked = select("band", difficulty=difficulty, base_wrong=np.zeros(4, bool), n=4, seed=0, band=(0.1, 0.9))
    assert sorted(picked) == [0, 1]


def test_same_seed_same_pick_and_seeds_break_ties_differently():
    difficulty = np.full(1000, 0.5)  # all tied, and inside the default band
    base_wrong = np.arange(1000) % 2 == 0  # half wrong, half right
    picks = {}
    for strategy in set(STRATEGIES) - {"all"}:
        first = select(strategy, difficulty=difficulty, base_wrong=base_wrong, n=10, seed=42)
        again = select(strategy, difficulty=difficulty, base_wrong=base_wrong, n=10, seed=42)
        other = select(strategy, difficulty=difficulty, base_wrong=base_wrong, n=10, seed=43)
        np.testing.assert_array_equal(first, again)
        assert set(first) != set(other)
        picks[strategy] = first
    # With every prompt tied, each ranking falls back to the seeded shuffle, which random shows.
    for strategy in ("hard", "easy", "learnable", "band"):
        np.testing.assert_array_equal(picks[strategy], picks["random"])
    whole = select("all", difficulty=difficulty, base_wrong=base_wrong, n=10, seed=42)
    assert sorted(whole) == list(range(1000))  # the budget does not limit the full-data baseline
    np.testing.assert_array_equal(whole[:10], picks["random"])


def test_symmetric_pass_rates_are_tied_for_learnable():
    # p = 0.3 and p = 0.7 have the same learnable chance; float noise must not decide between them.
    difficulty = np.array([0.7, 1 - 0.7, 0.3, 1 - 0.3] * 50)
    base_wrong = np.zeros(200, bool)
    firsts = {
        float(difficulty[select("learnable", difficulty=difficulty, base_wrong=base_wrong, n=1, seed=s)][0])
        for s in range(40)
    }
    assert {round(value, 6) for value in firsts} == {0.3, 0.7}


def test_selector_reuses_work_and_matches_select():
    difficulty, base_wrong = discrete_pool(500, seed=9)
    selector = Selector(difficulty, base_wrong, seed=11)
    for strategy in STRATEGIES:
        np.testing.assert_array_equal(
            selector.pick(strategy, 40),
            select(strategy, difficulty=difficulty, base_wrong=base_wrong, n=40, seed=11),
        )
    assert selector.pick("hard", 40) is selector.pick("hard", 40)
    assert not selector.pick("hard", 40).flags.writeable


def test_unprobed_prompts_are_never_picked():
    difficulty, base_wrong = discrete_pool(50, seed=10)
    difficulty[:20] = np.nan
    for strategy in STRATEGIES:
        base_wrong = np.full(50, strategy != "base_right")
        picked = select(strategy, difficulty=difficulty, base_wrong=base_wrong, n=50, seed=0, band=(0, 1))
        assert len(picked) == 30 and picked.min() >= 20


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "hardest"}, "hard, easy, medium, random, base_wrong, base_right, band, learnable, all"),
        ({"band": (0.9, 0.1)}, "0 <= lo <= hi <= 1"),
        ({"band": (-0.1, 0.5)}, "0 <= lo <= hi <= 1"),
        ({"group_size": 1}, ">= 2"),
        ({"n": -3}, ">= 0"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_parameters_raise_strategy_error(kwargs, message):
    difficulty, base_wrong = discrete_pool(10)
    arguments = {"strategy": "hard", "n": 3, "seed": 0, **kwargs}
    with pytest.raises(StrategyError, match=message):
        select(arguments.pop("strategy"), difficulty=difficulty, base_wrong=base_wrong, **arguments)


def test_bad_arrays_raise_strategy_error():
    with pytest.raises(StrategyError, match=r"\[0, 1\]"):
        select("hard", difficulty=np.array([0.5, 1.5]), base_wrong=np.zeros(2, bool), n=1, seed=0)
    with pytest.raises(StrategyError, match="same length"):
        select("hard", difficulty=np.array([0.5, 0.5]), base_wrong=np.zeros(3, bool), n=1, seed=0)


def test_both_ranking_paths_are_exercised():
    def keys(values: np.ndarray) -> np.ndarray:
        return np.rint(values * 1e12).astype(np.int64)

    assert _Ranking(keys(discrete_pool(100)[0]))._order is not None  # radix path
    assert _Ranking(keys(dense_pool(100)[0]))._order is None  # partition path


def test_every_rank_window_matches_a_stable_sort_on_both_paths():
    for values in (dense_pool(60, seed=6)[0], discrete_pool(60, k=4, seed=6)[0]):
        keys = np.rint(values * 1e12).astype(np.int64)
        ranking, expected = _Ranking(keys), np.argsort(keys, kind="stable")
        for start in range(61):
            for stop in range(start, 61):
                np.testing.assert_array_equal(ranking.ranks(start, stop), expected[start:stop])


def test_stable_radix_argsort_matches_numpy_on_wide_keys_with_ties():
    rng = np.random.default_rng(12)
    keys = rng.integers(0, 10**12, 5000)
    keys[::3] = keys[1::3][: len(keys[::3])]  # plenty of ties
    np.testing.assert_array_equal(_stable_argsort(keys), np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(_stable_argsort(np.array([5, 5, 0])), [2, 0, 1])
    assert _stable_argsort(np.array([], dtype=np.int64)).size == 0


def test_learnable_ranks_by_the_posterior_chance():
    rng = np.random.default_rng(5)
    correct, k = rng.binomial(8, rng.beta(0.4, 1.5, 300)), np.full(300, 8)
    counts = PassCounts.of(correct, k)
    selector = Selector(1.0 - correct / 8, np.zeros(300, bool), seed=3, counts=counts)
    for group_size in (2, 8, 16):
        chance = learnable_chance_posterior(counts, group_size, fit_prior(counts))[0]
        tier = np.rint(chance / LEARNABLE_RESOLUTION)  # chances that round the same are tied
        picked = selector.pick("learnable", 60, group_size=group_size)
        rest = np.setdiff1d(np.arange(300), picked)
        assert tier[picked].min() >= tier[rest].max()
        assert np.all(np.diff(tier[picked]) <= 0)  # most learnable first
        place = np.argsort(seeded_shuffle(300, 3))  # each prompt's place in the seed's shuffle
        for value in np.unique(tier[picked]):
            tied = picked[tier[picked] == value]
            assert np.all(np.diff(place[tied]) > 0)  # ties in shuffle order
    # Nearly equal chances are ties for the seed, distinct ones are not: under the demo pool's prior 4/8, 5/8
    # and 6/8 give 0.950, 0.964 and 0.951, within the posterior's spread (about 0.06), and 3/8 gives 0.902.
    prior = BetaPrior(0.67, 2.70, True)
    tied = PassCounts.of([4, 5, 6, 3], [8, 8, 8, 8])
    firsts = set()
    for seed in range(20):
        selector = Selector(1.0 - tied.correct / 8, np.zeros(4, bool), seed, counts=tied, prior=prior)
        picked = selector.pick("learnable", 3)
        assert set(picked.tolist()) == {0, 1, 2}
        firsts.add(int(picked[0]))
    assert firsts == {0, 1, 2}
    # A skewed prior breaks the plug-in's symmetry: 1/8 and 7/8 are no longer tied.
    chance = learnable_chance_posterior(PassCounts.of([1, 7], [8, 8]), 8, fit_prior(counts))[0]
    assert chance[0] != pytest.approx(chance[1], abs=1e-3)


def label_free_selector():
    rng = np.random.default_rng(6)
    agreement = rng.integers(1, 9, 50) / 8
    return Selector(1.0 - agreement, rng.random(50) < 0.3, seed=0, label_free=True)


@pytest.mark.parametrize("strategy", ["learnable", "band"])
def test_label_free_refuses_pass_rate_strategies_with_a_way_out(strategy):
    selector = label_free_selector()
    with pytest.raises(StrategyError, match="Label the prompts") as raised:
        selector.pick(strategy, 5)
    assert "agreement" in str(raised.value) and "hard" in str(raised.value)
    with pytest.raises(StrategyError, match="label-free"):
        select(strategy, difficulty=selector.difficulty, base_wrong=selector.base_wrong, n=5, seed=0,
               label_free=True)


def test_label_free_still_ranks_by_agreement_for_the_other_strategies():
    selector = label_free_selector()
    hard = selector.pick("hard", 10)
    assert selector.difficulty[hard].min() >= np.sort(selector.difficulty)[-10]
    assert set(selector.strategies) == set(STRATEGIES) - {"band", "learnable"}
