"""Forecasts for a subset before training: how often GRPO groups will have mixed rewards.

GRPO learns only from groups whose G rewards differ. With success probability p per generation,
a group is all-correct with chance p^G and all-wrong with (1-p)^G, so it is learnable with chance
1 - p^G - (1-p)^G. The mean of that over a subset is its predicted learnable share, at step 0:
training moves p, so the forecast is for the probed model only.

p is not known, only c correct of k probe samples; ``posterior`` turns (c, k) into each prompt's
expected chance. Label-free probes have no pass rates, so they get no forecast (agreement is not a
success rate: a prompt answered wrong the same way every time has agreement 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.curation.posterior import PassCounts
from backend.curation.strategies import (
    DEFAULT_BAND,
    DEFAULT_GROUP_SIZE,
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
    """Chance that a group of ``group_size`` generations at a known success rate ``p`` has mixed
    rewards: what a forecast aims at. From probe counts, ``forecast_subset`` uses the posterior."""
    g = check_group_size(group_size)
    p = np.asarray(p, dtype=np.float64)
    chance = _power(p, g)
    failure = 1.0 - p
    chance += _power(failure, g)
    np.subtract(1.0, chance, out=chance)
    # Clipped at 0: at p = 0 or 1 float rounding could otherwise give -1e-17.
    return np.maximum(chance, 0.0, out=chance)


_Z95 = 1.959963984540054  # two-sided 95% normal quantile


@dataclass(frozen=True)
class ShareForecast:
    """Predicted learnable share of a subset at step 0 (the probed model, before training moves p),
    with a 95% interval."""

    share: float
    low: float
    high: float


def share_forecast(chance_mean: np.ndarray, chance_variance: np.ndarray) -> ShareForecast:
    """The subset's share from its prompts' posterior chances (``learnable_chance_posterior``).

    The interval is 95% of the posterior of the subset's mean chance: prompts independent given the
    fitted prior, normal approximation from the exact per-prompt variances. It leaves out the
    uncertainty of the prior fit itself. An empty subset forecasts 0 (nothing to learn from).
    """
    if chance_mean.size == 0:
        return ShareForecast(0.0, 0.0, 0.0)
    share = float(chance_mean.mean())
    half_width = _Z95 * float(np.sqrt(chance_variance.sum())) / chance_mean.size
    return ShareForecast(share, max(0.0, share - half_width), min(1.0, share + half_width))


def forecast_fields(forecast: ShareForecast | None) -> dict[str, float | None]:
    """The forecast as the API and the subset table name it; None everywhere when there is none."""
    return {"predicted_learnable_share": None if forecast is None else forecast.share,
            "predicted_learnable_share_low": None if forecast is None else forecast.low,
            "predicted_learnable_share_high": None if forecast is None else forecast.high}


def forecast_subset(selector: Selector, picked: np.ndarray, group_size: int) -> ShareForecast | None:
    """The predicted learnable share at step 0 of the prompts ``picked`` from ``selector``'s pool:
    from the posterior given the selector's counts, or exact (variance 0) when its pass rates are
    known exactly. None for a label-free pool (agreement is not a success rate)."""
    if selector.label_free:
        return None
    if selector.counts is not None:
        mean, variance = selector.posterior_chance(group_size)
    else:
        mean = learnable_chance(np.nan_to_num(1.0 - selector.difficulty), group_size)
        variance = np.zeros_like(mean)
    return share_forecast(mean[picked], variance[picked])


def compare_picks(
    selector: Selector,
    n: int,
    *,
    group_size: int = DEFAULT_GROUP_SIZE,
    band: tuple[float, float] = DEFAULT_BAND,
) -> list[dict]:
    """One row per strategy the pool supports, at the same N, from an existing ``Selector``.

    Means and the overlap are None for a strategy that picked nothing (a mean of nothing is not 0).
    Label-free: no band or learnable rows, no forecast, and the success-side mean is agreement.
    """
    picks = {
        strategy: selector.pick(strategy, n, group_size=group_size, band=band)
        for strategy in selector.strategies
    }
    in_hard = np.zeros(selector.difficulty.size, dtype=bool)
    in_hard[picks["hard"]] = True
    rows = []
    for strategy, picked in picks.items():
        empty = picked.size == 0
        mean_difficulty = None if empty else float(selector.difficulty[picked].mean())
        success = None if empty else 1.0 - mean_difficulty
        forecast = forecast_subset(selector, picked, group_size)
        rows.append(
            {
                "strategy": strategy,
                "n_picked": int(picked.size),
                **forecast_fields(forecast),
                "mean_pass_rate": None if selector.label_free else success,
                "mean_agreement": success if selector.label_free else None,
                "mean_difficulty": mean_difficulty,
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
    *,
    counts: PassCounts | None = None,
    label_free: bool = False,
) -> list[dict]:
    """Every strategy's pick at budget ``n`` side by side: size, predicted learnable share at step 0
    with its interval, mean pass rate (mean agreement when label-free), mean difficulty and the
    share also picked by ``hard``."""
    selector = Selector(difficulty, base_wrong, seed, counts=counts, label_free=label_free)
    return compare_picks(selector, n, group_size=group_size, band=band)
