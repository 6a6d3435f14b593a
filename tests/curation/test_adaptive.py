"""The adaptive stop rule (backend.curation.adaptive) on recorded outcomes."""

import numpy as np
import pytest

from backend.curation.adaptive import StopRule, drawn_by, next_draws, open_prompts, replay, rounds_at_most, wilson_width
from backend.curation.posterior import PassCounts
from backend.curation.scores import wilson_interval
from backend.curation.strategies import Selector


def picks(strategy: str, n: int, correct, drawn, seed: int = 0) -> set[int]:
    correct, drawn = np.asarray(correct), np.asarray(drawn)
    selector = Selector(1 - correct / drawn, np.zeros(correct.size, bool), seed, counts=PassCounts(correct, drawn))
    return set(selector.pick(strategy, n).tolist())


def outcomes_for(pass_rates: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((pass_rates.size, k)) < pass_rates[:, None]


@pytest.mark.parametrize("fields, words", [
    ({"first_round": 9}, "first_round <= k"),
    ({"round_size": 0}, "round_size >= 1"),
    ({"strategy": None, "n": None}, "needs a strategy with its N, a max_width"),
    ({"strategy": None, "n": 5, "max_width": 0.3}, "needs a strategy with its N"),
    ({"strategy": "random"}, "the decision needs one of hard, easy, medium, learnable, band"),
    ({"n": 0}, "N >= 1"),
])
def test_a_stop_rule_refuses_what_it_cannot_apply(fields, words):
    with pytest.raises(ValueError, match=words):
        StopRule(**{"k": 8, "first_round": 2, "round_size": 2, "strategy": "hard", "n": 5, **fields})


def test_wilson_width_is_the_scores_interval():
    correct, drawn = np.array([0, 1, 3, 8, 5]), np.array([2, 4, 8, 8, 10])
    intervals = [wilson_interval(int(c), int(n)) for c, n in zip(correct, drawn, strict=True)]
    expected = [high - low for low, high in intervals]
    assert wilson_width(correct, drawn) == pytest.approx(expected)


def test_a_clear_cut_pool_is_decided_in_one_round():
    # Half never solved, half always: after 2 samples nothing can move a prompt across hard's threshold.
    outcomes = outcomes_for(np.repeat([0.0, 1.0], 50), k=8)
    rule = StopRule(k=8, first_round=2, round_size=2, strategy="hard", n=10)
    run = replay(rule, outcomes)
    assert run.rounds == 1 and (run.drawn == 2).all() and run.saved == pytest.approx(0.75)
    assert picks("hard", 10, run.correct, run.drawn) == picks("hard", 10, outcomes.sum(1), np.full(100, 8))


@pytest.mark.parametrize("strategy", ["hard", "easy", "medium", "learnable", "band"])
def test_rounds_follow_the_schedule_and_stop_at_k(strategy):
    outcomes = outcomes_for(np.random.default_rng(1).beta(0.6, 0.6, 120), k=9)
    rule = StopRule(k=9, first_round=3, round_size=2, strategy=strategy, n=24)
    run = replay(rule, outcomes)
    schedule = {drawn_by(rule, r) for r in range(1, rounds_at_most(rule) + 1)}
    assert schedule == {3, 5, 7, 9} and set(run.drawn.tolist()) <= schedule
    assert 1 < run.rounds <= rounds_at_most(rule) == 4
    assert (run.correct == np.array([outcomes[i, :d].sum() for i, d in enumerate(run.drawn)])).all()
    assert 0 < run.saved < 1 - 3 / 9


def test_a_smaller_tolerance_spends_more_samples_and_keeps_more_picks():
    outcomes = outcomes_for(np.random.default_rng(2).beta(0.6, 0.6, 200), k=8)
    full = picks("hard", 50, outcomes.sum(1), np.full(200, 8))
    runs = {tolerance: replay(StopRule(k=8, first_round=2, round_size=2, strategy="hard", n=50, tolerance=tolerance),
                              outcomes) for tolerance in (0.001, 0.02, 0.3)}
    saved = [runs[t].saved for t in sorted(runs)]
    assert saved == sorted(saved) and saved[0] < saved[-1]
    identical = {t: len(full & picks("hard", 50, r.correct, r.drawn)) / 50 for t, r in runs.items()}
    assert identical[0.001] >= 0.98 and identical[0.001] >= identical[0.3]


def test_the_width_rule_stops_prompts_once_their_interval_is_narrow():
    outcomes = np.zeros((40, 16), dtype=bool)
    outcomes[20:, ::2] = True  # right every other time: c/n stays 1/2
    run = replay(StopRule(k=16, first_round=4, round_size=4, max_width=0.5), outcomes)
    assert (run.drawn[:20] == 4).all()  # 0 of 4: Wilson (0, 0.49)
    assert (run.drawn[20:] == 12).all()  # 2 of 4 and 4 of 8 are wider than 0.5; 6 of 12 is 0.49
    assert ((wilson_width(run.correct, run.drawn) <= 0.5) | (run.drawn == 16)).all()


def test_a_prompt_stopped_early_is_reopened_and_catches_up_when_its_decision_moves():
    # After round 3: four prompts at 1 of 6, two stopped in round 1 at 0 of 2. Hard's 2 are now the two
    # under-sampled ones, and whether they stay the hardest is open: they are opened again, to the next round's 8.
    rule = StopRule(k=8, first_round=2, round_size=2, strategy="hard", n=2, tolerance=0.01)
    correct, drawn = np.array([1, 1, 1, 1, 0, 0]), np.array([6, 6, 6, 6, 2, 2])
    opened = open_prompts(rule, correct, drawn, round_index=3)
    assert opened[4:].all()
    assert next_draws(rule, drawn, opened, round_index=3)[4:].tolist() == [6, 6]


@pytest.mark.parametrize("strategy", ["hard", "easy", "medium", "learnable", "band"])
@pytest.mark.parametrize("seed", [0, 7])
def test_memberships_at_full_counts_are_the_selectors_picks(strategy, seed):
    from backend.curation.adaptive import memberships, shuffle_positions
    from backend.curation.posterior import fit_prior

    correct = np.random.default_rng(seed).binomial(8, np.random.default_rng(seed + 1).beta(0.6, 0.6, 150))
    counts = PassCounts.of(correct, np.full(150, 8))
    rule = StopRule(k=8, first_round=2, round_size=2, strategy=strategy, n=30, seed=seed)
    full, now = memberships(rule, counts, counts, shuffle_positions(150, seed), fit_prior(counts))
    assert (full == now).all()
    assert set(np.flatnonzero(full).tolist()) == picks(strategy, 30, correct, np.full(150, 8), seed=seed)
