"""Comparing training runs: summaries of a run's logged metrics and the least-squares fit of accuracy
gain on learnable % (the paper's Figure 3). Pure: plain numbers in, plain numbers out.

Definitions (also in docs/design.md):
- base accuracy: ``eval/accuracy`` at step 0 (the adapter starts as a no-op, so this is the base model);
- final accuracy: ``eval/accuracy`` at the run's last evaluated step after step 0;
- learnable %: the share of training steps with non-zero within-group reward std (``learnable_share > 0``),
  in percent;
- measured learnable share: the mean over steps of ``learnable_share = 1 - frac_reward_zero_std``, the
  share of prompt groups with mixed rewards, comparable to the probe's predicted learnable share. With
  one prompt per step the two are the same number (one as a percentage).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

ACCURACY = "eval/accuracy"
EVAL_SAMPLES = "eval/samples"
LEARNABLE = "learnable_share"


@dataclass(frozen=True)
class Fit:
    slope: float | None
    intercept: float | None
    r2: float | None
    n_points: int

    def as_dict(self) -> dict:
        return asdict(self)


def linear_fit(xs: list[float], ys: list[float]) -> Fit:
    """Ordinary least squares y = intercept + slope·x and its R² = 1 − SS_res / SS_tot.

    Undefined parts are None: the line needs two distinct x values, R² needs the ys to vary."""
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys differ in length ({len(xs)} vs {len(ys)})")
    n = len(xs)
    if n < 2:
        return Fit(None, None, None, n)
    if min(xs) == max(xs):
        return Fit(None, None, None, n)
    mean_x, mean_y = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    sxy = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    ss_tot = math.fsum((y - mean_y) ** 2 for y in ys)
    ss_res = math.fsum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = None if min(ys) == max(ys) else 1.0 - ss_res / ss_tot  # equal ys: nothing to explain
    return Fit(slope, intercept, r2, n)


@dataclass(frozen=True)
class RunSummary:
    base_accuracy: float | None
    final_accuracy: float | None
    gain: float | None
    learnable_pct: float | None
    measured_learnable_share: float | None
    steps: int
    base_samples: int | None = None  # evaluation prompts behind the base and final accuracies
    final_samples: int | None = None
    best_accuracy: float | None = None  # the highest evaluated accuracy after step 0 (the paper reports it too)


def summarize_run(series: dict[str, dict[str, list]]) -> RunSummary:
    """A run's comparison numbers from its metric series ({key: {"steps", "values"}})."""
    accuracy, samples = (dict(zip(series.get(key, {}).get("steps", []), series.get(key, {}).get("values", []),
                                  strict=True)) for key in (ACCURACY, EVAL_SAMPLES))
    base = accuracy.get(0)
    later = [step for step in accuracy if step > 0]
    final_step = max(later) if later else None
    final = accuracy[final_step] if later else None
    shares = [v for s, v in zip(series.get(LEARNABLE, {}).get("steps", []),
                                series.get(LEARNABLE, {}).get("values", []), strict=True) if s > 0]
    learnable_pct = 100.0 * sum(1 for v in shares if v > 0) / len(shares) if shares else None
    measured = math.fsum(shares) / len(shares) if shares else None
    gain = final - base if final is not None and base is not None else None
    return RunSummary(base, final, gain, learnable_pct, measured, len(shares), _count(samples.get(0)),
                      _count(samples.get(final_step)), max((accuracy[s] for s in later), default=None))


def _count(value: float | None) -> int | None:
    return int(value) if value is not None else None


def steps_to_reach(series: dict[str, dict[str, list]], target: float) -> int | None:
    """The first evaluated step after step 0 whose accuracy reaches ``target`` (None: never, or no curve).
    With ``target`` = 95% of the experiment's best final accuracy this is the second paper's "steps to
    95%"; its resolution is ``eval_every``."""
    accuracy = series.get(ACCURACY, {})
    for step, value in zip(accuracy.get("steps", []), accuracy.get("values", []), strict=True):
        if step > 0 and value >= target:
            return step
    return None


def running_mean(values: list[float]) -> list[float]:
    """The mean of values[:i+1] for every i: a readable curve of a 0/1-valued per-step share."""
    out, total = [], 0.0
    for i, value in enumerate(values, start=1):
        total += value
        out.append(total / i)
    return out
