"""Adaptive probing: sample in rounds, and stop sampling a prompt once more samples are unlikely to change
the decision the manager is making.

A probe with a stop rule draws ``first_round`` samples of every prompt, then rounds of ``round_size`` for the
prompts still open, up to k. After each round, `open_prompts` says which prompts need more:

- **the decision** (a strategy and its budget N, the seed that breaks its ties): for each prompt not yet at k,
  the chance that it is picked at full k but not now, or the reverse. That chance comes from simulation: the
  remaining samples of every prompt are drawn from its posterior predictive (the pool's fitted Beta prior
  updated by its own counts, `backend.curation.posterior`), and the strategy picks from each simulated full-k
  pool. The prompts least likely to flip stop, as many as keep the summed flip chance within ``tolerance`` x N:
  the expected share of picks that differ from a full-k probe's. Each round weighs every prompt below k again,
  so one stopped earlier is reopened when the moving threshold made its flip chance grow.
- **a width**: a prompt stops once its 95% Wilson interval is at most ``max_width`` wide.

A prompt stops when either rule lets it. Pure logic: the worker applies it to the probe's counts after each
round, and `replay` applies it to recorded samples (the bench and the tests).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from backend.curation.posterior import PassCounts, fit_prior
from backend.curation.strategies import DEFAULT_BAND, DEFAULT_GROUP_SIZE, Selector

DECISION_STRATEGIES = ("hard", "easy", "medium", "learnable", "band")  # those that read pass rates
DRAWS = 200  # simulated full-k pools a round; the flip chances are then known to about +-0.035


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


def wilson_width(correct: np.ndarray, drawn: np.ndarray, z: float = 1.96) -> np.ndarray:
    """Width of each prompt's 95% Wilson interval (`backend.curation.scores.wilson_interval`, vectorised)."""
    p, z2 = correct / drawn, z * z
    denominator = 1 + z2 / drawn
    centre = (p + z2 / (2 * drawn)) / denominator
    half = z * np.sqrt(p * (1 - p) / drawn + z2 / (4 * drawn * drawn)) / denominator
    return np.minimum(1.0, centre + half) - np.maximum(0.0, centre - half)


def flip_chances(rule: StopRule, correct: np.ndarray, drawn: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per prompt, the chance that the strategy's pick at full k differs from its pick on these counts
    (in one and not the other), by simulating the remaining samples ``DRAWS`` times."""
    counts = PassCounts.of(correct, drawn)
    prior = fit_prior(counts)
    zeros = np.zeros(correct.size, dtype=bool)

    def picked(c: np.ndarray, n: np.ndarray, draw_prior) -> np.ndarray:
        selector = Selector(1.0 - c / n, zeros, rule.seed, counts=PassCounts(c, n), prior=draw_prior)
        inside = np.zeros(c.size, dtype=bool)
        inside[selector.pick(rule.strategy, rule.n, group_size=rule.group_size, band=rule.band)] = True
        return inside

    now = picked(counts.correct, counts.k, prior)
    remaining = rule.k - counts.k
    full_k = np.full(correct.size, rule.k, dtype=np.int64)
    # learnable ranks by a posterior chance whose prior a full-k probe would fit anew; the other strategies
    # read pass rates only, so they skip the fit
    refit = rule.strategy == "learnable"
    flips = np.zeros(correct.size)
    for _ in range(DRAWS):
        p = rng.beta(prior.a + counts.correct, prior.b + counts.k - counts.correct)
        final = counts.correct + rng.binomial(remaining, p)
        final_prior = fit_prior(PassCounts(final, full_k)) if refit else None
        flips += picked(final, full_k, final_prior) != now
    return flips / DRAWS


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
    if rule.max_width is not None:
        candidates &= wilson_width(correct, drawn) > rule.max_width + 1e-12
    if rule.strategy is None or not candidates.any():
        return candidates
    chances = flip_chances(rule, correct, drawn, np.random.default_rng([rule.seed, round_index]))
    order = np.flatnonzero(candidates)
    order = order[np.argsort(chances[order], kind="stable")]
    opened = candidates.copy()
    opened[order[np.cumsum(chances[order]) <= rule.tolerance * rule.n + 1e-12]] = False
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
