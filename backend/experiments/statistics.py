"""Intervals for comparing runs: how far an evaluation accuracy, a gain or a difference between two
strategies could move by chance. Pure: plain numbers in, plain numbers out.

- An evaluation accuracy is a share of n held-out prompts answered correctly: its 95% interval is Wilson's
  (good at small n and near 0 or 1, where the normal interval collapses).
- A gain (final − base accuracy) and a difference between two runs' accuracies are differences of two
  such shares: Newcombe's hybrid score interval (his method 10) built from the two Wilson intervals. It
  treats the two evaluations as independent; evaluated on the same prompts they are positively correlated,
  so the interval is conservative (wider than a paired one) and "beyond noise" is a safe claim.
- A strategy repeated over seeds: the mean of its runs with a 95% t interval (the seed-to-seed spread).
- The fit of gain on learnable % gets a percentile bootstrap interval for R² and the slope.
"""

from __future__ import annotations

import math
import random

from backend.curation.scores import wilson_interval
from backend.experiments.comparison import linear_fit

Interval = tuple[float, float]
MIN_BOOTSTRAP_POINTS = 8


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


# Two-sided 95% quantiles of Student's t by degrees of freedom (an experiment repeats a strategy over at most
# 10 seeds, so at most 9 degrees of freedom).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_interval(values: list[float]) -> tuple[float, Interval | None]:
    """The mean of runs repeated over seeds and its 95% t interval (None for a single run): how far the mean
    could move with other seeds, the seed-to-seed spread (not the evaluation noise of each run)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = _T975.get(n - 1, 1.96) * spread / math.sqrt(n)
    return mean, (mean - half, mean + half)


def excludes_zero(interval: Interval | None) -> bool:
    return interval is not None and (interval[0] > 0 or interval[1] < 0)


def bootstrap_fit(xs: list[float], ys: list[float], *, resamples: int = 2000,
                  seed: int = 0) -> dict[str, Interval | None]:
    """95% percentile-bootstrap intervals of the least-squares fit's R² and slope, resampling the points;
    None with fewer than ``MIN_BOOTSTRAP_POINTS`` points: resamples of a few points often hold two distinct
    x values, which a line fits exactly (R² = 1), so the interval would say nothing. Resamples with fewer
    than 3 distinct x, or an undefined fit, are skipped."""
    if len(xs) < MIN_BOOTSTRAP_POINTS:
        return {"r2": None, "slope": None}
    rng = random.Random(seed)
    points = list(zip(xs, ys, strict=True))
    r2s, slopes = [], []
    for _ in range(resamples):
        sample = [points[rng.randrange(len(points))] for _ in points]
        if len({x for x, _ in sample}) < 3:
            continue
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
