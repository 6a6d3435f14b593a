"""How far a label-free "hard" pick can be trusted: agreement-based against pass-rate-based difficulty.

A manager with unlabeled prompts ranks them by 1 - agreement (the model's self-disagreement). On a
probe whose prompts do have gold answers we can compare that ranking with the one by 1 - pass rate:

- Spearman's rho over all prompts (average ranks for ties), with a 95% interval from Fisher's z and
  the Bonett-Wright standard error sqrt((1 + rho^2 / 2) / (m - 3)) for m prompts;
- at a budget of n prompts: the Jaccard overlap of the two hard-n picks, and ``recall``, the share
  of the pass-rate hard-n that the agreement pick finds.

Ties: with a weak model most pass rates are 0, so "the hard-n by pass rate" is a random draw among
the tied prompts at the cut (the app breaks ties with a seeded shuffle). Both sides' ties are broken
uniformly at random and independently, and we report expectations over that:

- recall exactly: a prompt is in a pick with probability 1 above the cut, r/m among the m prompts
  tied at the cut of which r are taken, 0 below; E[overlap] = sum of p_i * q_i by linearity;
- Jaccard by averaging ``TIE_DRAWS`` seeded draws of the overlap from its exact law (Jaccard is
  not linear in the overlap); the standard error is below 0.002.

For scale: ``chance_recall`` = n / prompts (a random pick) and ``best_recall``, what a second
pass-rate pick with its own tie-break would score; with many ties even a perfect ranking cannot
beat that, so read recall between the two.

Values are compared after rounding to 12 decimals, as the selection strategies do, so float noise
(1 - 0.7 against 0.3) never splits a tie.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

LOW_RHO = 0.4  # below this, a label-free pick is close to random: warn
MIN_PROMPTS_FOR_INTERVAL = 10  # Fisher's z needs m > 3; below 10 the interval says nothing useful
TIE_DRAWS = 100_000  # seeded tie-break draws averaged for the expected Jaccard (each O(1))
Z_95 = 1.959963984540054
_DECIMALS = 12


@dataclass(frozen=True)
class TrustReport:
    """Agreement against pass rate on one probe. Overlaps are expectations over random tie-breaks."""

    prompts: int
    n: int
    rho: float | None  # Spearman, 1 - agreement against 1 - pass rate; None if either side is constant
    rho_low: float | None  # 95% interval; None with fewer than 10 prompts or without rho
    rho_high: float | None
    jaccard: float  # expected Jaccard of the hard-n by pass rate and the hard-n by agreement
    recall: float  # expected share of the pass-rate hard-n that the agreement pick finds (exact)
    chance_recall: float  # a uniformly random pick: n / prompts
    chance_jaccard: float  # a uniformly random pick (exact, hypergeometric overlap)
    best_recall: float  # a second pass-rate pick with its own tie-break: the ceiling ties allow
    best_jaccard: float
    pass_rate_ties_at_cut: int  # prompts sharing the pass rate at the cut of the hard-n ...
    pass_rate_taken_from_ties: int  # ... and how many of them the pick needs
    mean_pass_rate: float
    mixed_share: float  # share of prompts with 0 < pass rate < 1
    tie_draws: int
    warning: str | None
    note: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def trust_report(agreement: np.ndarray, pass_rate: np.ndarray, n: int, seed: int = 0) -> TrustReport:
    """Compare the label-free ranking (1 - agreement) with the labelled one (1 - pass rate).

    ``agreement`` and ``pass_rate``: one value in [0, 1] per prompt, same order. ``n``: the budget,
    1 <= n <= prompts. ``seed``: for the tie-break draws behind the expected Jaccard.
    Raises ValueError when the inputs cannot be compared.
    """
    agree, passed = _check_pair(agreement, pass_rate)
    prompts = agree.size
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= prompts:
        raise ValueError(f"n must be a whole number of prompts from 1 to {prompts} (the prompts given), got {n!r}")
    n = int(n)
    by_agreement = np.round(1.0 - agree, _DECIMALS)
    by_pass_rate = np.round(1.0 - passed, _DECIMALS)

    notes: list[str] = []
    rho = spearman(by_agreement, by_pass_rate)
    low = high = None
    if rho is None:
        constant = [name for name, values in (("agreement", by_agreement), ("pass rate", by_pass_rate))
                    if np.all(values == values[0])]
        notes.append(f"Spearman's rho is undefined: every prompt has the same {' and the same '.join(constant)}, "
                     f"so that side ranks nothing; probe more prompts or a model whose results vary.")
    elif prompts < MIN_PROMPTS_FOR_INTERVAL:
        notes.append(f"No interval for rho: {prompts} prompts, and it needs at least {MIN_PROMPTS_FOR_INTERVAL}.")
    else:
        low, high = rho_interval(rho, prompts)

    p_in = inclusion_probabilities(by_pass_rate, n)
    q_in = inclusion_probabilities(by_agreement, n)
    recall = float(np.dot(p_in, q_in)) / n
    best_recall = float(np.dot(p_in, p_in)) / n
    rng = np.random.default_rng(seed)
    jaccard = _expected_jaccard(by_pass_rate, by_agreement, n, rng)
    best_jaccard = _expected_jaccard(by_pass_rate, by_pass_rate, n, rng)
    tied, taken = _cut(by_pass_rate, n)[1:]
    if taken < tied:
        notes.append(f"The hard-{n} by pass rate is not unique: {tied} prompts share the pass rate at the cut and "
                     f"{taken} of them are taken, so overlaps are expectations over random tie-breaks; even a "
                     f"perfect ranking expects recall {best_recall:.2f} here.")
    warning = None
    if rho is not None and rho < LOW_RHO:
        verdict = "close to random" if rho > -LOW_RHO else "worse than random (it favours the easy prompts)"
        warning = (f"Agreement ranks prompts unlike pass rate here (ρ = {rho:.2f}): a label-free pick is {verdict}; "
                   f"label a sample and check.")
    return TrustReport(
        prompts=prompts, n=n, rho=rho, rho_low=low, rho_high=high, jaccard=jaccard, recall=recall,
        chance_recall=n / prompts, chance_jaccard=chance_jaccard(prompts, n), best_recall=best_recall,
        best_jaccard=best_jaccard, pass_rate_ties_at_cut=tied, pass_rate_taken_from_ties=taken,
        mean_pass_rate=float(passed.mean()), mixed_share=float(np.mean((passed > 0) & (passed < 1))),
        tie_draws=TIE_DRAWS, warning=warning, note=" ".join(notes) or None)


def _check_pair(agreement: np.ndarray, pass_rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    agree = np.asarray(agreement, dtype=np.float64)
    passed = np.asarray(pass_rate, dtype=np.float64)
    if agree.ndim != 1 or agree.shape != passed.shape:
        raise ValueError(f"agreement and pass_rate must be 1-D arrays of one value per prompt, same length; "
                         f"got shapes {agree.shape} and {passed.shape}")
    if agree.size == 0:
        raise ValueError("no prompts to compare: both arrays are empty")
    for name, values in (("agreement", agree), ("pass_rate", passed)):
        bad = np.flatnonzero(~((values >= 0.0) & (values <= 1.0)))  # also catches NaN
        if bad.size:
            raise ValueError(f"{name} must lie in [0, 1] for every prompt; prompt {bad[0]} has {values[bad[0]]!r} "
                             f"({bad.size} such). Leave out prompts that were not probed or have no gold answer.")
    return agree, passed


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of the ranks they span."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], values.size]
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rho (Pearson's r of average ranks); None when either side is constant."""
    rx, ry = average_ranks(x), average_ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denominator = math.sqrt(float(np.dot(rx, rx)) * float(np.dot(ry, ry)))
    if denominator == 0.0:
        return None
    return max(-1.0, min(1.0, float(np.dot(rx, ry)) / denominator))


def rho_interval(rho: float, prompts: int, z: float = Z_95) -> tuple[float, float]:
    """95% interval for Spearman's rho: Fisher's z with the Bonett-Wright standard error.

    At |rho| = 1 the transform is infinite and the interval collapses to the point itself.
    """
    if prompts <= 3:
        raise ValueError(f"the interval needs more than 3 prompts, got {prompts}")
    if abs(rho) >= 1.0:
        return rho, rho
    half = z * math.sqrt((1.0 + rho * rho / 2.0) / (prompts - 3))
    centre = math.atanh(rho)
    return math.tanh(centre - half), math.tanh(centre + half)


def _cut(difficulty: np.ndarray, n: int) -> tuple[float, int, int]:
    """The difficulty at the cut of the hard-n, how many prompts share it, how many of those are taken."""
    cut = float(np.partition(difficulty, difficulty.size - n)[difficulty.size - n])
    above = int(np.count_nonzero(difficulty > cut))
    return cut, int(np.count_nonzero(difficulty == cut)), n - above


def inclusion_probabilities(difficulty: np.ndarray, n: int) -> np.ndarray:
    """Chance that each prompt is in the hard-n when ties at the cut are broken uniformly at random."""
    cut, tied, taken = _cut(difficulty, n)
    return np.where(difficulty > cut, 1.0, np.where(difficulty == cut, taken / tied, 0.0))


def overlap_draws(first: np.ndarray, second: np.ndarray, n: int, rng: np.random.Generator,
                  draws: int = TIE_DRAWS) -> np.ndarray:
    """Sizes of |A & B| for ``draws`` independent tie-breaks of A = hard-n by ``first``, B = by ``second``.

    Only the tied prompts at each cut are random, so the overlap is drawn from its exact law instead
    of drawing whole picks: with A = (sure part Ap) + a random r-subset of the m tied Tp, and B
    likewise (Bs, an s-subset of the t tied Ta), the overlap is |Ap & Bs| + x + h, where (x, y) count
    A's tied picks in Bs and in Ta (multivariate hypergeometric), and h, B's tied picks that land in
    A, is hypergeometric with |Ap & Ta| + y good of t. Each draw costs O(1) whatever the pool size.
    """
    cut_a, _, r = _cut(first, n)
    cut_b, _, s = _cut(second, n)
    sure_a, tied_a = first > cut_a, first == cut_a
    sure_b, tied_b = second > cut_b, second == cut_b
    base = int(np.count_nonzero(sure_a & sure_b))
    alpha = int(np.count_nonzero(tied_a & sure_b))
    beta = int(np.count_nonzero(tied_a & tied_b))
    gamma = int(np.count_nonzero(sure_a & tied_b))
    m, t = int(np.count_nonzero(tied_a)), int(np.count_nonzero(tied_b))
    xy = rng.multivariate_hypergeometric([alpha, beta, m - alpha - beta], r, size=draws)
    good = gamma + xy[:, 1]
    h = rng.hypergeometric(good, t - good, s) if s else np.zeros(draws, dtype=np.int64)
    return base + xy[:, 0] + h


def _expected_jaccard(first: np.ndarray, second: np.ndarray, n: int, rng: np.random.Generator) -> float:
    overlap = overlap_draws(first, second, n, rng).astype(np.float64)
    return float(np.mean(overlap / (2 * n - overlap)))


def chance_jaccard(prompts: int, n: int) -> float:
    """Expected Jaccard of two independent uniformly random n-subsets of ``prompts`` (exact)."""
    log_all = _log_comb(prompts, n)
    expected = 0.0
    for overlap in range(max(0, 2 * n - prompts), n + 1):
        log_p = _log_comb(n, overlap) + _log_comb(prompts - n, n - overlap) - log_all
        expected += math.exp(log_p) * overlap / (2 * n - overlap)
    return expected


def _log_comb(a: int, b: int) -> float:
    return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)


def scatter_points(agreement: np.ndarray, pass_rate: np.ndarray, max_points: int = 2000, *,
                   seed: int = 0) -> dict:
    """Points for a Plotly scatter of pass rate against agreement, at most ``max_points`` of them.

    Probe scores take few distinct values (c/k), so identical (agreement, pass rate) pairs are
    merged with a ``count`` (use it for marker size): lossless, and usually far below the cap. Only
    when the distinct pairs still exceed ``max_points`` is a seeded uniform sample of prompts merged
    instead (``sampled`` True; counts are then of the sample).
    """
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    agree, passed = _check_pair(agreement, pass_rate)
    pairs = np.round(np.column_stack([agree, passed]), _DECIMALS)
    unique, counts = np.unique(pairs, axis=0, return_counts=True)
    sampled = unique.shape[0] > max_points
    if sampled:
        rng = np.random.default_rng(seed)
        chosen = rng.choice(pairs.shape[0], size=max_points, replace=False)
        unique, counts = np.unique(pairs[chosen], axis=0, return_counts=True)
    return {"agreement": unique[:, 0].tolist(), "pass_rate": unique[:, 1].tolist(), "count": counts.tolist(),
            "prompts": int(agree.size), "sampled": bool(sampled)}
