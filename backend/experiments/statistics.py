"""Intervals for comparing runs: how far an evaluation accuracy, a gain or a difference between two
strategies could move by chance. Pure: plain numbers in, plain numbers out.

- An evaluation accuracy is a share of n held-out prompts answered correctly: its 95% interval is Wilson's
  (good at small n and near 0 or 1, where the normal interval collapses).
- A gain (final − base accuracy) and a difference between two runs' accuracies are differences of two
  such shares: Newcombe's hybrid score interval (his method 10) built from the two Wilson intervals. It
  treats the two evaluations as independent; evaluated on the same prompts they are positively correlated,
  so the interval is conservative (wider than a paired one) and "beyond noise" is a safe claim.
- The fit of gain on learnable % gets a percentile bootstrap interval for R² and the slope.
"""

from __future__ import annotations

import math
import random

from backend.curation.scores import wilson_interval
from backend.experiments.comparison import linear_fit

Interval = tuple[float, float]


def accuracy_interval(accuracy: float, samples: int) -> Interval:
    """95% Wilson interval of an accuracy measured on ``samples`` prompts."""
    return wilson_interval(round(accuracy * samples), samples)


def difference_interval(first: float, first_samples: int, second: float, second_samples: int) -> Interval:
    """95% interval of ``second − first`` (Newcombe's hybrid score interval)."""
    low1, high1 = accuracy_interval(first, first_samples)
    low2, high2 = accuracy_interval(second, second_samples)
    difference = second - first
    return (difference - math.sqrt((second - low2) ** 2 + (high1 - first) ** 2),
            difference + math.sqrt((high2 - second) ** 2 + (first - low1) ** 2))


def excludes_zero(interval: Interval | None) -> bool:
    return interval is not None and (interval[0] > 0 or interval[1] < 0)


def bootstrap_fit(xs: list[float], ys: list[float], *, resamples: int = 2000,
                  seed: int = 0) -> dict[str, Interval | None]:
    """95% percentile-bootstrap intervals of the least-squares fit's R² and slope, resampling the points;
    None with fewer than 3 points (a resample of 2 points fits them exactly). Resamples where the fit is
    undefined (all x equal, or all y equal for R²) are skipped."""
    if len(xs) < 3:
        return {"r2": None, "slope": None}
    rng = random.Random(seed)
    points = list(zip(xs, ys, strict=True))
    r2s, slopes = [], []
    for _ in range(resamples):
        sample = [points[rng.randrange(len(points))] for _ in points]
        fit = linear_fit([x for x, _ in sample], [y for _, y in sample])
        if fit.slope is not None:
            slopes.append(fit.slope)
        if fit.r2 is not None:
            r2s.append(fit.r2)
    return {"r2": _percentiles(r2s), "slope": _percentiles(slopes)}


def _percentiles(values: list[float]) -> Interval | None:
    if len(values) < 20:
        return None
    values = sorted(values)
    return values[int(0.025 * (len(values) - 1))], values[int(math.ceil(0.975 * (len(values) - 1)))]
