"""Adaptive probing: sample in rounds, and stop sampling a prompt once more samples are unlikely to change
the decision the manager is making.

A probe with a stop rule draws ``first_round`` samples of every prompt, then rounds of ``round_size`` for the
prompts still open, up to k. After each round, `open_prompts` says which prompts need more:

- **the decision** (a strategy and its budget N, the seed that breaks its ties). The remaining samples of every
  prompt are simulated ``DRAWS`` times from its posterior predictive (the pool's fitted Beta prior updated by its
  own counts, `backend.curation.posterior`). The prompts are ordered by their flip chance: how often, over the
  simulated full-k pools, stopping the prompt now changes whether the strategy picks it (`flip_chances`). Then
  the longest run of that order stops whose stopping keeps the expected number of picks that differ from the
  full-k pick within ``tolerance`` x N, checked with the product's own Selector on the simulated pools
  (`safe_stops`). Each round weighs every prompt below k again, so one stopped earlier is reopened when the
  moving threshold made it riskier.
- **a width**: a prompt stops once its 95% Wilson interval is at most ``max_width`` wide.

A prompt stops when either rule lets it. Pure logic: the worker applies it to the probe's counts after each
round, and `replay` applies it to recorded samples (the bench and the tests).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from backend.curation.posterior import BetaPrior, PassCounts, fit_prior, learnable_chance_posterior
from backend.curation.scores import wilson_interval
from backend.curation.strategies import (
    DEFAULT_BAND,
    DEFAULT_GROUP_SIZE,
    KEY_SCALE,
    Selector,
    learnable_keys,
    seeded_shuffle,
)

DECISION_STRATEGIES = ("hard", "easy", "medium", "learnable", "band")  # those that read pass rates
DRAWS = 200  # simulated full-k pools a round: a flip chance of 0.05 is then known to about +-0.03


@dataclass(frozen=True)
class StopRule:
    """When a prompt needs no more samples. ``k`` is the most a prompt gets (the probe's k)."""

    k: int
    first_round: int
    round_size: int
    strategy: str | None = None
    n: int | None = None
    seed: int = 0
    group_size: int = DEFAULT_GROUP_SIZE
    band: tuple[float, float] = DEFAULT_BAND
    tolerance: float = 0.02
    max_width: float | None = None

    def __post_init__(self):
        if not 1 <= self.first_round <= self.k or self.round_size < 1:
            raise ValueError(f"need 1 <= first_round <= k and round_size >= 1 (k={self.k}, first_round="
                             f"{self.first_round}, round_size={self.round_size})")
        if self.strategy is None and (self.max_width is None or self.n is not None):
            raise ValueError("a stop rule needs a strategy with its N, a max_width, or both")
        if self.strategy is not None and (self.strategy not in DECISION_STRATEGIES or self.n is None or self.n < 1):
            raise ValueError(f"the decision needs one of {', '.join(DECISION_STRATEGIES)} and N >= 1")

    def to_dict(self) -> dict:
        return {**asdict(self), "band": list(self.band)}

    @classmethod
    def from_dict(cls, data: dict) -> StopRule:
        return cls(**{**data, "band": tuple(data.get("band", DEFAULT_BAND))})


def wilson_width(correct: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Width of each prompt's 95% Wilson interval, computed once per distinct (correct, drawn): a few dozen."""
    pairs, inverse = np.unique(np.stack([correct, drawn], axis=1), axis=0, return_inverse=True)
    widths = np.array([high - low for low, high in (wilson_interval(int(c), int(n)) for c, n in pairs)])
    return widths[inverse.ravel()]


def simulate_full_counts(rule: StopRule, counts: PassCounts, rng: np.random.Generator) -> np.ndarray:
    """``DRAWS`` simulated full-k pools (draws x prompts correct counts): each prompt's remaining samples drawn from
    its posterior predictive under the pool's fitted prior."""
    prior = fit_prior(counts)
    if not prior.fitted:  # no sample right (or none wrong) yet: the uniform fallback would expect many soon
        mean = (counts.correct.sum() + 0.5) / (counts.k.sum() + 1.0)  # Jeffreys' estimate of the pool's rate
        prior = BetaPrior(mean, 1.0 - mean, fitted=False)
    p = rng.beta(prior.a + counts.correct, prior.b + counts.k - counts.correct, size=(DRAWS, counts.k.size))
    return counts.correct + rng.binomial(rule.k - counts.k, p)


def full_priors(rule: StopRule, finals: np.ndarray) -> list:
    """The prior a probe would fit to each simulated full-k pool: learnable ranks by a posterior chance under it;
    the other strategies need none."""
    full_k = np.full(finals.shape[1], rule.k, dtype=np.int64)
    return [fit_prior(PassCounts(final, full_k)) if rule.strategy == "learnable" else None for final in finals]


def flip_chances(rule: StopRule, counts: PassCounts, finals: np.ndarray, priors: list) -> np.ndarray:
    """Per prompt, the chance over the simulated pools that stopping it now changes whether the strategy picks it:
    picked at full k, against picked with its current counts among the others at full k."""
    full_k = np.full(counts.k.size, rule.k, dtype=np.int64)
    positions = shuffle_positions(counts.k.size, rule.seed)
    flips = np.zeros(counts.k.size)
    for final, prior in zip(finals, priors, strict=True):
        full, stopped = memberships(rule, PassCounts(final, full_k), counts, positions, prior)
        flips += full != stopped
    return flips / len(finals)


def _picked(rule: StopRule, correct: np.ndarray, k: np.ndarray, prior=None) -> np.ndarray:
    """What the product picks from these counts (Selector; its prior fitted to them unless given), as a mask."""
    selector = Selector(1.0 - correct / k, np.zeros(k.size, dtype=bool), rule.seed, counts=PassCounts(correct, k),
                        prior=prior)
    inside = np.zeros(k.size, dtype=bool)
    inside[selector.pick(rule.strategy, rule.n, group_size=rule.group_size, band=rule.band)] = True
    return inside


def safe_stops(rule: StopRule, counts: PassCounts, finals: np.ndarray, priors: list, order: np.ndarray,
               stopped_anyway: np.ndarray) -> int:
    """How many of the candidates in ``order`` (least likely to flip first) can stop now: the most whose stopping
    keeps the expected number of picks that differ from the full-k pick within ``tolerance`` x N, checked on the
    simulated pools with the product's own selection (the stopped prompts, these and ``stopped_anyway``, at their
    counts; the rest at k)."""
    full_k = np.full(counts.k.size, rule.k, dtype=np.int64)
    full_picks = [_picked(rule, final, full_k, prior) for final, prior in zip(finals, priors, strict=True)]

    def expected_misses(m: int) -> float:
        stopped = stopped_anyway.copy()
        stopped[order[:m]] = True
        k = np.where(stopped, counts.k, rule.k)
        misses = [full.sum() - (full & _picked(rule, np.where(stopped, counts.correct, final), k)).sum()
                  for final, full in zip(finals, full_picks, strict=True)]
        return float(np.mean(misses))

    allowed = rule.tolerance * rule.n + 1e-12
    low, high = 0, order.size  # expected_misses(low) is within; find the largest such m by bisection
    if expected_misses(high) <= allowed:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if expected_misses(middle) <= allowed else (low, middle)
    return low


def shuffle_positions(size: int, seed: int) -> np.ndarray:
    """Each prompt's place in the Selector's seeded shuffle, which breaks its ties."""
    shuffle = seeded_shuffle(size, seed)
    positions = np.empty(size, dtype=np.int64)
    positions[shuffle] = np.arange(size)
    return positions


def _keys(rule: StopRule, counts: PassCounts, prior) -> np.ndarray:
    """The Selector's integer ranking key for each prompt (ascending: picked first), at its rounding."""
    difficulty = np.rint((1.0 - counts.correct / counts.k) * KEY_SCALE).astype(np.int64)
    if rule.strategy == "hard":
        return KEY_SCALE - difficulty
    if rule.strategy == "learnable":
        return learnable_keys(learnable_chance_posterior(counts, rule.group_size, prior)[0])
    return difficulty  # easy, medium (and band, which reads it as a pass rate)


def memberships(rule: StopRule, full: PassCounts, now: PassCounts, positions: np.ndarray,
                prior) -> tuple[np.ndarray, np.ndarray]:
    """Whether the strategy picks each prompt from the pool at ``full`` counts, and whether it would pick the
    prompt with its ``now`` counts instead, the others at ``full`` (one prompt moving shifts no one else's rank
    by more than one: ignored). The same order as Selector.pick: keys, ties by shuffle position."""
    size = positions.size
    n = min(rule.n, size)
    full_keys, now_keys = _keys(rule, full, prior), _keys(rule, now, prior)
    if rule.strategy == "band":
        lo, hi = round(rule.band[0] * KEY_SCALE), round(rule.band[1] * KEY_SCALE)
        inside_full = (KEY_SCALE - full_keys >= lo) & (KEY_SCALE - full_keys <= hi)
        inside_now = (KEY_SCALE - now_keys >= lo) & (KEY_SCALE - now_keys <= hi)
        by_position = np.zeros(size + 1, dtype=np.int64)
        by_position[positions + 1] = inside_full
        before = np.cumsum(by_position)[positions]  # eligible prompts ahead of each one in the shuffle
        return inside_full & (before < n), inside_now & (before < n)
    # Ranks among the others: keys made dense so that (key, position) fits one int64.
    dense = np.unique(np.concatenate([full_keys, now_keys]), return_inverse=True)[1]
    full_order, now_order = dense[:size] * size + positions, dense[size:] * size + positions
    ranked = np.sort(full_order)
    full_rank = np.searchsorted(ranked, full_order)
    now_rank = np.searchsorted(ranked, now_order) - (full_order < now_order)
    start = (size - n) // 2 if rule.strategy == "medium" else 0
    return ((full_rank >= start) & (full_rank < start + n)), ((now_rank >= start) & (now_rank < start + n))


def drawn_by(rule: StopRule, round_index: int) -> int:
    """Samples an open prompt has after round ``round_index`` (1 is the first round)."""
    return min(rule.k, rule.first_round + (round_index - 1) * rule.round_size)


def open_prompts(rule: StopRule, correct: np.ndarray, drawn: np.ndarray, round_index: int) -> np.ndarray:
    """Which prompts (a boolean mask) get more samples after round ``round_index`` (1 is the first), given each
    prompt's correct samples of those drawn so far. Every prompt below k is a candidate, also one stopped in an
    earlier round: the threshold moves as others are sampled, and a prompt whose flip chance grew is opened again
    (it catches up, `next_draws`), until the last round (`rounds_at_most`). Reproducible: the simulation is
    seeded by the rule's seed and the round."""
    correct, drawn = np.asarray(correct, dtype=np.int64), np.asarray(drawn, dtype=np.int64)
    candidates = drawn < rule.k
    if round_index >= rounds_at_most(rule):  # the last round brought every open prompt to k
        return np.zeros_like(candidates)
    narrow = np.zeros_like(candidates)
    if rule.max_width is not None:
        narrow = candidates & (wilson_width(correct, drawn) <= rule.max_width + 1e-12)
        candidates &= ~narrow
    if rule.strategy is None or not candidates.any():
        return candidates
    counts = PassCounts.of(correct, drawn)
    finals = simulate_full_counts(rule, counts, np.random.default_rng([rule.seed, round_index]))
    priors = full_priors(rule, finals)
    chances = flip_chances(rule, counts, finals, priors)
    order = np.flatnonzero(candidates)
    order = order[np.argsort(chances[order], kind="stable")]
    opened = candidates.copy()
    opened[order[:safe_stops(rule, counts, finals, priors, order, narrow)]] = False
    return opened


def next_draws(rule: StopRule, drawn: np.ndarray, opened: np.ndarray, round_index: int) -> np.ndarray:
    """Samples each prompt gets in round ``round_index + 1``: an open prompt is brought to that round's count
    (`drawn_by`), so a reopened one catches up and a probe takes at most `rounds_at_most` rounds."""
    return np.where(opened, np.maximum(drawn_by(rule, round_index + 1) - np.asarray(drawn), 0), 0)


@dataclass(frozen=True)
class Replay:
    drawn: np.ndarray  # samples each prompt used
    correct: np.ndarray  # of those, correct
    rounds: int
    k: int

    @property
    def saved(self) -> float:
        """Share of samples not drawn, against k for every prompt."""
        return float(1.0 - self.drawn.sum() / (self.k * self.drawn.size)) if self.drawn.size else 0.0


def replay(rule: StopRule, outcomes: np.ndarray) -> Replay:
    """Apply the rule to recorded samples: ``outcomes`` is (prompts x k) correctness in draw order, and a
    round reads the next columns. What an adaptive probe would have drawn had its samples been these."""
    outcomes = np.asarray(outcomes, dtype=bool)
    if outcomes.ndim != 2 or outcomes.shape[1] != rule.k:
        raise ValueError(f"outcomes must be prompts x k (k={rule.k}), got shape {outcomes.shape}")
    cumulative = np.concatenate([np.zeros((outcomes.shape[0], 1), dtype=np.int64),
                                 np.cumsum(outcomes, axis=1)], axis=1)
    rows = np.arange(outcomes.shape[0])
    drawn = np.full(outcomes.shape[0], rule.first_round, dtype=np.int64)
    rounds = 1
    while True:
        opened = open_prompts(rule, cumulative[rows, drawn], drawn, rounds)
        if not opened.any():
            break
        drawn = drawn + next_draws(rule, drawn, opened, rounds)
        rounds += 1
    return Replay(drawn=drawn, correct=cumulative[rows, drawn], rounds=rounds, k=rule.k)


def rounds_at_most(rule: StopRule) -> int:
    """The most rounds a probe can take (every prompt sampled to k)."""
    return 1 + math.ceil((rule.k - rule.first_round) / rule.round_size)
