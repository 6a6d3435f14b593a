"""trust_report: Spearman's rho with its interval, and tie-aware overlaps of the two hard-n picks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from backend.labels.trust import (
    LOW_RHO,
    average_ranks,
    chance_jaccard,
    overlap_draws,
    rho_interval,
    scatter_points,
    spearman,
    trust_report,
)


def direct_spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho from ranks computed one by one: below + (equal + 1) / 2, then Pearson's r."""
    def ranks(v):
        return np.array([np.sum(v < value) + (np.sum(v == value) + 1) / 2 for value in v])
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def test_same_ordering_gives_rho_one_and_full_recall():
    pass_rate = np.linspace(0, 1, 50)
    report = trust_report(pass_rate.copy(), pass_rate, 10)
    assert report.rho == pytest.approx(1.0)
    assert report.recall == pytest.approx(1.0)
    assert report.jaccard == pytest.approx(1.0)
    assert report.warning is None
    assert report.chance_recall == pytest.approx(10 / 50)


def test_reversed_ordering_gives_rho_minus_one_and_a_warning():
    pass_rate = np.linspace(0, 1, 50)
    report = trust_report(1.0 - pass_rate, pass_rate, 10)
    assert report.rho == pytest.approx(-1.0)
    assert report.recall == 0.0
    assert "ρ = -1.00" in report.warning and "label a sample" in report.warning


def test_independent_scores_give_rho_near_zero_with_an_interval_around_it():
    rng = np.random.default_rng(7)
    report = trust_report(rng.random(2000), rng.random(2000), 200)
    assert abs(report.rho) < 0.08
    assert report.rho_low < 0 < report.rho_high
    assert report.recall == pytest.approx(report.chance_recall, abs=0.05)
    assert report.jaccard == pytest.approx(report.chance_jaccard, abs=0.03)
    assert report.warning is not None


def test_rho_matches_a_direct_rank_computation_with_ties():
    rng = np.random.default_rng(3)
    pass_rate = rng.integers(0, 9, 300) / 8  # c/k values: many ties, as probes give
    agreement = np.clip(pass_rate + rng.integers(-2, 3, 300) / 8, 0.125, 1)
    expected = direct_spearman(1 - agreement, 1 - pass_rate)
    try:
        from scipy.stats import spearmanr
    except ImportError:
        pass
    else:
        assert spearmanr(1 - agreement, 1 - pass_rate).statistic == pytest.approx(expected)
    assert trust_report(agreement, pass_rate, 30).rho == pytest.approx(expected, abs=1e-12)
    assert average_ranks(np.array([0.5, 0.1, 0.5, 0.9])).tolist() == [2.5, 1.0, 2.5, 4.0]


def test_float_noise_does_not_split_a_tie():
    agreement = np.array([0.2, 0.6, 0.9])
    noisy = trust_report(agreement, np.array([1 - 0.7, 0.3, 0.8]), 1)  # 1 - 0.7 is 0.30000000000000004
    clean = trust_report(agreement, np.array([0.3, 0.3, 0.8]), 1)
    assert noisy.rho == pytest.approx(clean.rho) and noisy.pass_rate_ties_at_cut == 2


def test_constant_pass_rate_gives_no_rho_and_says_why():
    report = trust_report(np.linspace(0.2, 1, 40), np.zeros(40), 4)
    assert report.rho is None and report.rho_low is None and report.rho_high is None
    assert "same pass rate" in report.note
    assert report.warning is None
    assert spearman(np.ones(5), np.arange(5.0)) is None


def test_few_prompts_give_rho_without_an_interval():
    report = trust_report(np.array([0.1, 0.5, 0.3, 0.9, 0.7]), np.array([0.0, 0.4, 0.2, 1.0, 0.6]), 2)
    assert report.rho == pytest.approx(1.0)
    assert report.rho_low is None and "at least 10" in report.note


def test_recall_is_chance_when_all_pass_rates_tie():
    rng = np.random.default_rng(5)
    report = trust_report(rng.random(80), np.zeros(80), 8)
    assert report.recall == pytest.approx(8 / 80)
    assert report.best_recall == pytest.approx(8 / 80)
    assert report.pass_rate_ties_at_cut == 80 and report.pass_rate_taken_from_ties == 8
    assert "not unique" in report.note


def test_a_perfect_ranking_under_ties_reaches_only_the_tie_ceiling():
    # 6 prompts solved sometimes, 34 never: the hard-8 by pass rate is 8 of the 34, at random.
    pass_rate = np.r_[np.linspace(0.2, 0.8, 6), np.zeros(34)]
    agreement = 1 - np.r_[np.zeros(6), np.linspace(0.5, 0.9, 34)]  # ranks all unsolved ones hardest
    report = trust_report(agreement, pass_rate, 8)
    assert report.recall == pytest.approx(8 / 34)
    assert report.best_recall == pytest.approx(8 / 34)
    assert report.recall > report.chance_recall


def _exact_overlaps(first: np.ndarray, second: np.ndarray, n: int) -> list[int]:
    """Overlap of every pair of tie-breaks, enumerated (each pair equally likely)."""
    def picks(d):
        cut = np.sort(d)[::-1][n - 1]
        sure = set(np.flatnonzero(d > cut))
        return [sure | set(c) for c in itertools.combinations(np.flatnonzero(d == cut), n - len(sure))]
    return [len(a & b) for a in picks(first) for b in picks(second)]


def test_expected_overlaps_match_an_enumeration_of_all_tie_breaks():
    first = np.array([0.9, 0.5, 0.5, 0.5, 0.5, 0.1, 0.1, 0.0, 0.5, 0.2])
    second = np.array([0.5, 0.5, 0.9, 0.2, 0.5, 0.5, 0.7, 0.5, 0.0, 0.5])
    n = 4
    overlaps = np.array(_exact_overlaps(first, second, n), dtype=float)
    report = trust_report(1 - second, 1 - first, n)  # difficulty: first by pass rate, second by agreement
    assert report.recall == pytest.approx(overlaps.mean() / n)
    assert report.jaccard == pytest.approx(np.mean(overlaps / (2 * n - overlaps)), abs=0.005)
    drawn = overlap_draws(first, second, n, np.random.default_rng(0))
    assert drawn.mean() / n == pytest.approx(overlaps.mean() / n, abs=0.005)
    assert set(np.unique(drawn)) <= set(np.unique(overlaps))


def test_chance_jaccard_matches_an_enumeration():
    prompts, n = 7, 3
    subsets = [set(c) for c in itertools.combinations(range(prompts), n)]
    expected = np.mean([len(a & b) / len(a | b) for a in subsets for b in subsets])
    assert chance_jaccard(prompts, n) == pytest.approx(expected)
    assert chance_jaccard(10, 10) == pytest.approx(1.0)


def test_interval_narrows_as_prompts_grow():
    rng = np.random.default_rng(11)
    pass_rate = rng.random(30)
    agreement = np.clip(pass_rate + rng.normal(0, 0.3, 30), 0, 1)
    small = trust_report(agreement, pass_rate, 3)
    large = trust_report(np.tile(agreement, 10), np.tile(pass_rate, 10), 30)  # same rho, 10x the prompts
    assert small.rho_high - small.rho_low > large.rho_high - large.rho_low
    widths = [hi - lo for lo, hi in (rho_interval(0.5, m) for m in (20, 80, 320))]
    assert widths[0] > widths[1] > widths[2]
    low, high = rho_interval(0.5, 100)  # Bonett-Wright: se = sqrt((1 + 0.125) / 97)
    half = 1.959963984540054 * math.sqrt(1.125 / 97)
    assert (low, high) == pytest.approx((math.tanh(math.atanh(0.5) - half), math.tanh(math.atanh(0.5) + half)))


def test_warning_starts_below_the_threshold():
    base = np.arange(100, dtype=float)
    rng = np.random.default_rng(2)
    for noise, warned in ((5.0, False), (400.0, True)):
        report = trust_report(np.clip((base + rng.normal(0, noise, 100)) / 2000 + 0.4, 0, 1), base / 100, 10)
        assert (report.warning is not None) == warned == (report.rho < LOW_RHO)


@pytest.mark.parametrize("agreement, pass_rate, n, message", [
    ([0.5, float("nan")], [0.5, 0.5], 1, "prompt 1"),
    ([0.5, 1.2], [0.5, 0.5], 1, "[0, 1]"),
    ([0.5], [0.5, 0.5], 1, "same length"),
    ([0.5, 0.5], [0.5, 0.5], 3, "from 1 to 2"),
    ([0.5, 0.5], [0.5, 0.5], 0, "from 1 to 2"),
])
def test_bad_inputs_are_refused_with_a_reason(agreement, pass_rate, n, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        trust_report(np.array(agreement), np.array(pass_rate), n)


def test_as_dict_has_every_field():
    report = trust_report(np.linspace(0, 1, 20), np.linspace(0, 1, 20), 5)
    as_dict = report.as_dict()
    assert as_dict["prompts"] == 20 and as_dict["n"] == 5 and as_dict["rho"] == pytest.approx(1.0)


def test_scatter_points_merge_duplicates_and_respect_the_cap():
    rng = np.random.default_rng(4)
    pass_rate = rng.integers(0, 9, 5000) / 8
    agreement = rng.integers(1, 9, 5000) / 8
    points = scatter_points(agreement, pass_rate)
    assert not points["sampled"] and sum(points["count"]) == 5000 and len(points["count"]) <= 9 * 8
    assert points["prompts"] == 5000
    dense = scatter_points(rng.random(5000), rng.random(5000), max_points=300)
    assert dense["sampled"] and len(dense["agreement"]) == 300 and sum(dense["count"]) == 300
