"""What a probe's (correct, k) counts say about each prompt's true pass rate p, and about the chance
that a GRPO group of G generations on it has mixed rewards, 1 - p^G - (1-p)^G.

Plugging the observed c/k in for p is biased: 0 of k correct forecasts 0, yet at p = 0.1 with k = 8
the chance is 0.57 and 43% of such prompts show 0/8. Instead p gets a Beta(a, b) prior fitted to the
whole pool by maximum likelihood (beta-binomial), and each prompt's chance is its posterior mean
under Beta(a + c, b + k - c), computed exactly from Beta moments. Because this is a mean given the
observed c, it stays calibrated for subsets picked by c (hard, easy, learnable), which an estimator
that is unbiased only over the whole pool (1 - C(c,G)/C(k,G) - C(k-c,G)/C(k,G)) is not: that one
gives 0 for every 0/k prompt too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PassCounts:
    """Correct samples out of k for each prompt (arrays of the same length)."""

    correct: np.ndarray
    k: np.ndarray

    @classmethod
    def of(cls, correct, k) -> PassCounts:
        correct, k = np.asarray(correct, dtype=np.int64), np.asarray(k, dtype=np.int64)
        if correct.shape != k.shape or correct.ndim != 1:
            raise ValueError("correct and k must be 1-D arrays of the same length")
        if correct.size and (k.min() < 1 or correct.min() < 0 or (correct > k).any()):
            raise ValueError("every prompt needs 0 <= correct <= k and k >= 1")
        return cls(correct, k)


@dataclass(frozen=True)
class BetaPrior:
    a: float
    b: float
    fitted: bool  # False: the uniform Beta(1, 1), because the pool could not support a fit


UNIFORM = BetaPrior(1.0, 1.0, fitted=False)

# Search box for the fit, in (logit of the prior mean, log of a + b). a + b at the top (1e6) means
# "every prompt has the same p" (posteriors barely move off the pool mean); at the bottom, a pool
# split between p = 0 and p = 1.
_LOGIT_MEAN = (-12.0, 12.0)
_LOG_STRENGTH = (np.log(1e-3), np.log(1e6))


def fit_prior(counts: PassCounts) -> BetaPrior:
    """Maximum-likelihood Beta prior for the pool's pass rates (beta-binomial likelihood).

    Falls back to the uniform prior when the pool cannot pin a prior down: fewer than two prompts,
    or no prompt ever passed (or every sample passed), where the likelihood peaks at p = 0 (or 1)
    exactly and would forecast that no group can ever be mixed.
    """
    correct, k = counts.correct, counts.k
    if correct.size < 2 or correct.sum() in (0, k.sum()):
        return UNIFORM
    top = int(k.max())
    # The likelihood depends only on how many prompts share each (c, k): a few dozen cells.
    cells = np.bincount(correct * (top + 1) + k, minlength=(top + 1) ** 2)
    nonzero = np.flatnonzero(cells)
    c, n, weight = nonzero // (top + 1), nonzero % (top + 1), cells[nonzero].astype(np.float64)
    logit_grid, log_grid = np.linspace(*_LOGIT_MEAN, 61), np.linspace(*_LOG_STRENGTH, 61)
    for _ in range(5):  # coarse to fine: each round zooms to +-2 steps around the best point
        logit, log_strength = (axis.ravel() for axis in np.meshgrid(logit_grid, log_grid, indexing="ij"))
        mean, strength = 1.0 / (1.0 + np.exp(-logit)), np.exp(log_strength)
        score = _log_likelihood(mean * strength, (1.0 - mean) * strength, c, n, weight, top)
        best = int(np.argmax(score))
        logit_grid = _zoom(logit_grid, logit[best], _LOGIT_MEAN)
        log_grid = _zoom(log_grid, log_strength[best], _LOG_STRENGTH)
    mean, strength = 1.0 / (1.0 + np.exp(-logit[best])), np.exp(log_strength[best])
    return BetaPrior(float(mean * strength), float((1.0 - mean) * strength), fitted=True)


def _zoom(grid: np.ndarray, centre: float, bounds: tuple[float, float]) -> np.ndarray:
    step = grid[1] - grid[0]
    return np.linspace(max(bounds[0], centre - 2 * step), min(bounds[1], centre + 2 * step), 21)


def _log_likelihood(a, b, c, n, weight, top) -> np.ndarray:
    """Beta-binomial log-likelihood (without the binomial coefficients) for each candidate (a, b):
    sum over cells of weight * [log B(a + c, b + n - c) - log B(a, b)], as sums of log(x + j)."""
    j = np.arange(top, dtype=np.float64)

    def cumulative_log(x):  # column m: sum_{j < m} log(x + j)
        out = np.zeros((x.size, top + 1))
        np.cumsum(np.log(x[:, None] + j), axis=1, out=out[:, 1:])
        return out

    return (cumulative_log(a)[:, c] + cumulative_log(b)[:, n - c] - cumulative_log(a + b)[:, n]) @ weight


def learnable_chance_posterior(counts: PassCounts, group_size: int, prior: BetaPrior):
    """Posterior mean and variance, per prompt, of 1 - p^G - (1-p)^G given its (c, k) and the prior.

    Exact Beta moments: under Beta(a, b), E[p^n] = prod_{j<n} (a+j)/(a+b+j), and
    E[p^G (1-p)^G] = prod_{j<G} (a+j) (b+j) / prod_{j<2G} (a+b+j). Computed once per distinct
    (c, k) and gathered, so a million prompts cost a table lookup.
    """
    correct, k = counts.correct, counts.k
    if correct.size == 0:
        return np.empty(0), np.empty(0)
    top = int(k.max())
    c_table, k_table = np.meshgrid(np.arange(top + 1), np.arange(top + 1), indexing="ij")
    a = float(prior.a) + c_table.ravel()
    b = float(prior.b) + np.maximum(k_table.ravel() - c_table.ravel(), 0)  # cells with c > k are never read
    mean, variance = _chance_moments(a, b, group_size)
    cell = correct * (top + 1) + k
    return mean[cell], variance[cell]


def _chance_moments(a: np.ndarray, b: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    total = a + b
    p_power, q_power = np.ones_like(a), np.ones_like(a)  # E[p^n], E[(1-p)^n] for n = 0, 1, ...
    for j in range(g):
        p_power *= (a + j) / (total + j)
        q_power *= (b + j) / (total + j)
    p_g, q_g = p_power.copy(), q_power.copy()
    both = p_g.copy()  # E[p^G q^G] = E[p^G] * prod_{j<G} (b+j) / (a+b+G+j)
    for j in range(g):
        p_power *= (a + g + j) / (total + g + j)
        q_power *= (b + g + j) / (total + g + j)
        both *= (b + j) / (total + g + j)
    mean = 1.0 - p_g - q_g
    second = 1.0 - 2.0 * (p_g + q_g) + p_power + q_power + 2.0 * both  # E[(1 - p^G - q^G)^2]
    return np.clip(mean, 0.0, 1.0), np.maximum(second - mean * mean, 0.0)
