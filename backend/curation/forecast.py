"""Forecasts for a subset before training: how often GRPO groups will have mixed rewards.

GRPO learns only from groups whose G rewards differ. With success probability p per generation,
a group is all-correct with chance p^G and all-wrong with (1-p)^G, so it is learnable with chance
1 - p^G - (1-p)^G. The mean of that over a subset is its predicted learnable share.
"""

from __future__ import annotations

import numpy as np

from backend.curation.strategies import (
    DEFAULT_BAND,
    DEFAULT_GROUP_SIZE,
    STRATEGIES,
    Selector,
    check_group_size,
)


def _power(base: np.ndarray, exponent: int) -> np.ndarray:
    """base**exponent (exponent >= 1) by repeated squaring: a few multiplications beat a pow() per
    element. Returns a new array; ``base`` is left untouched."""
    result = None
    square = base
    while True:
        if exponent & 1:
            if result is None:  # the last square can be handed out as it is; earlier ones are reused
                result = square.copy() if square is base or exponent > 1 else square
            else:
                np.multiply(result, square, out=result)
        exponent >>= 1
        if not exponent:
            return result
        square = square * square if square is base else np.multiply(square, square, out=square)


def learnable_chance(p: np.ndarray, group_size: int) -> np.ndarray:
    """Chance that a group of ``group_size`` generations at success rate ``p`` has mixed rewards."""
    g = check_group_size(group_size)
    p = np.asarray(p, dtype=np.float64)
    chance = _power(p, g)
    failure = 1.0 - p
    chance += _power(failure, g)
    np.subtract(1.0, chance, out=chance)
    # Clipped at 0: at p = 0 or 1 float rounding could otherwise give -1e-17.
    return np.maximum(chance, 0.0, out=chance)


def predicted_learnable_share(p: np.ndarray, group_size: int) -> float:
    """Mean learnable chance over a subset; 0.0 for an empty subset (nothing to learn from)."""
    chance = learnable_chance(p, group_size)
    return float(chance.mean()) if chance.size else 0.0


def compare_picks(
    selector: Selector,
    n: int,
    *,
    group_size: int = DEFAULT_GROUP_SIZE,
    band: tuple[float, float] = DEFAULT_BAND,
) -> list[dict]:
    """One row per strategy at the same N, from an existing ``Selector`` (reuses its rankings).

    Means and the overlap are None for a strategy that picked nothing (a mean of nothing is not 0).
    """
    picks = {
        strategy: selector.pick(strategy, n, group_size=group_size, band=band) for strategy in STRATEGIES
    }
    in_hard = np.zeros(selector.difficulty.size, dtype=bool)
    in_hard[picks["hard"]] = True
    rows = []
    for strategy, picked in picks.items():
        pass_rate = 1.0 - selector.difficulty[picked]
        empty = picked.size == 0
        mean_pass_rate = None if empty else float(pass_rate.mean())
        rows.append(
            {
                "strategy": strategy,
                "n_picked": int(picked.size),
                "predicted_learnable_share": predicted_learnable_share(pass_rate, group_size),
                "mean_pass_rate": mean_pass_rate,
                "mean_difficulty": None if empty else 1.0 - mean_pass_rate,
                "overlap_with_hard": None if empty else np.count_nonzero(in_hard[picked]) / picked.size,
            }
        )
    return rows


def compare_strategies(
    difficulty: np.ndarray,
    base_wrong: np.ndarray,
    n: int,
    seed: int,
    group_size: int = DEFAULT_GROUP_SIZE,
    band: tuple[float, float] = DEFAULT_BAND,
) -> list[dict]:
    """Every strategy's pick at budget ``n`` side by side: size, predicted learnable share,
    mean pass rate (p = 1 - difficulty), mean difficulty and the share also picked by ``hard``."""
    return compare_picks(Selector(difficulty, base_wrong, seed), n, group_size=group_size, band=band)
