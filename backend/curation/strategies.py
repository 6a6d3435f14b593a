"""Selection strategies: which N prompts a budget buys, in pick order (most preferred first).

Every strategy works on one seeded shuffle of the pool, so ties are broken by the seed and a
selection is reproducible from (difficulty, base_wrong, strategy, N, seed):

- ranking strategies (hard, easy, medium, learnable) take a stable sort of a key *in shuffled
  order*, so equal keys keep their shuffled order;
- sampling strategies (random, base_wrong, base_right, band) take the first N eligible prompts of the
  shuffle; base_right (the model's first answer is right) is the paper's size-matched contrast to base_wrong;
- ``all`` takes every probed prompt whatever N is: the full-data baseline the papers compare against.

Keys are compared after rounding to 12 decimals, so float noise (1 - 0.7 vs 0.3) never outranks
the seed. Prompts whose difficulty is NaN (not probed) are never picked.

Difficulty is 1 - pass rate, or 1 - agreement for a label-free probe. ``learnable`` and ``band`` are
defined on pass rates only, so a label-free Selector refuses them (agreement is not a success rate).
With probe counts, ``learnable`` ranks by each prompt's posterior expected chance of a mixed group
(``posterior``), the same estimate the forecast reports, to the nearest LEARNABLE_RESOLUTION: the seed breaks
ties between chances that round the same.

Speed: a preview on a million prompts runs all strategies. The shuffle is made once per
``Selector``; each ranking is a 16-bit radix sort when the keys take few distinct values (the
usual c/k difficulties), otherwise a partition around the wanted ranks followed by a radix sort of
just those.
"""

from __future__ import annotations

import operator

import numpy as np

from backend.curation.posterior import BetaPrior, PassCounts, fit_prior, learnable_chance_posterior

STRATEGIES = ("hard", "easy", "medium", "random", "base_wrong", "base_right", "band", "learnable", "all")
WHOLE_POOL = "all"  # ignores the budget's N
DEFAULT_GROUP_SIZE = 8
DEFAULT_BAND = (0.1, 0.9)

KEY_SCALE = 10**12  # keys are rounded to 12 decimals; equal after rounding means tied
# learnable ranks posterior chances to the nearest 0.05: their posterior spread from k <= 16 samples is 0.05 or
# more near the top, so a finer order is noise, and neighbouring counts (4, 5, 6 of 8) become ties for the seed.
LEARNABLE_RESOLUTION = 0.05
_BUCKETS = 1 << 16


PASS_RATE_STRATEGIES = ("band", "learnable")  # need a success rate; refused for label-free probes


class StrategyError(ValueError):
    """An unknown strategy or a bad strategy parameter; the message names the allowed values."""


def label_free_refusal(strategy: str) -> str:
    allowed = ", ".join(s for s in STRATEGIES if s not in PASS_RATE_STRATEGIES)
    return (f"The {strategy} strategy needs pass rates, and this probe is label-free: its pool has no "
            f"answers, so difficulty is 1 - agreement, and agreement is not a success rate (a prompt "
            f"answered wrong the same way every time has agreement 1). Label the prompts (upload the pool "
            f"with answers), probe it, and use {strategy} on that probe; on this one use {allowed}.")


def _check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise StrategyError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")


def check_group_size(group_size: int) -> int:
    """The GRPO group size G as an int; StrategyError unless it is a whole number >= 2."""
    try:
        size = operator.index(group_size)
    except TypeError:
        raise StrategyError(f"group size must be a whole number >= 2, got {group_size!r}") from None
    if isinstance(group_size, bool) or size < 2:
        raise StrategyError(f"group size must be a whole number >= 2, got {group_size!r}")
    return size


def _check_band(band: tuple[float, float]) -> tuple[float, float]:
    message = f"band must be two pass rates (lo, hi) with 0 <= lo <= hi <= 1, got {band!r}"
    try:
        lo, hi = (float(edge) for edge in band)
    except (TypeError, ValueError):
        raise StrategyError(message) from None
    if not 0.0 <= lo <= hi <= 1.0:
        raise StrategyError(message)
    return lo, hi


def _check_count(n: int) -> int:
    try:
        count = operator.index(n)
    except TypeError:
        raise StrategyError(f"N must be a whole number of prompts >= 0, got {n!r}") from None
    if isinstance(n, bool) or count < 0:
        raise StrategyError(f"N must be a whole number of prompts >= 0, got {n!r}")
    return count


class _Ranking:
    """Positions (in shuffled order) ranked by an integer key ascending, ties by position."""

    def __init__(self, keys: np.ndarray):
        self.keys = keys
        self._order: np.ndarray | None = None
        # Few distinct keys (the usual case): a monotone 16-bit bucket per key is exact when no
        # bucket holds two different keys, and then one radix sort ranks everything.
        buckets = (keys * (_BUCKETS - 1) // KEY_SCALE).astype(np.uint16)
        first_key = np.empty(_BUCKETS, dtype=np.int64)
        first_key[buckets] = keys
        if np.array_equal(first_key[buckets], keys):
            self._order = np.argsort(buckets, kind="stable")

    def ranks(self, start: int, stop: int) -> np.ndarray:
        """Positions holding ranks start..stop-1, in rank order."""
        if stop <= start:
            return np.empty(0, dtype=np.int64)
        if self._order is not None:
            return self._order[start:stop]
        return self._partitioned_ranks(start, stop)

    def _partitioned_ranks(self, start: int, stop: int) -> np.ndarray:
        keys = self.keys
        partitioned = np.partition(keys, sorted({start, stop - 1}))
        low, high = partitioned[start], partitioned[stop - 1]
        # Ties at the window's edges are cut by position, exactly as a stable sort would.
        low_ties = np.flatnonzero(keys == low)[start - np.count_nonzero(keys < low) :]
        if low == high:
            return low_ties[: stop - start]
        chosen = (keys > low) & (keys < high)
        chosen[low_ties] = True
        chosen[np.flatnonzero(keys == high)[: stop - np.count_nonzero(keys < high)]] = True
        positions = np.flatnonzero(chosen)  # ascending, so a stable sort keeps ties in shuffle order
        return positions[_stable_argsort(keys[positions] - low)]


def _stable_argsort(keys: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative int64 keys, least significant 16 bits first.

    numpy radix-sorts 16-bit integers but falls back to timsort for int64; a few radix passes
    are two to three times faster than one timsort.
    """
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    remaining = int(keys.max()) >> 16 if keys.size else 0
    shift = 16
    while remaining:
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        remaining >>= 16
        shift += 16
    return order


def learnable_keys(chance: np.ndarray) -> np.ndarray:
    """learnable's ranking key of each posterior chance (ascending: picked first): the chance rounded to
    LEARNABLE_RESOLUTION, so chances that round the same are tied."""
    step = round(LEARNABLE_RESOLUTION * KEY_SCALE)
    return KEY_SCALE - np.rint(np.asarray(chance) / LEARNABLE_RESOLUTION).astype(np.int64) * step


def seeded_shuffle(size: int, seed: int) -> np.ndarray:
    """The prompt index at each place of the seed's shuffle: the order that breaks every strategy's ties."""
    try:
        rng = np.random.default_rng(operator.index(seed))
    except (TypeError, ValueError):
        raise StrategyError(f"seed must be a whole number >= 0, got {seed!r}") from None
    # int32 indices shuffle faster and halve the memory; pools never near 2**31 prompts.
    shuffle = np.arange(size, dtype=np.int32 if size < 2**31 else np.int64)
    rng.shuffle(shuffle)
    return shuffle


class Selector:
    """Picks for every strategy from one pool and seed; build once, call ``pick`` many times."""

    def __init__(
        self,
        difficulty: np.ndarray,
        base_wrong: np.ndarray,
        seed: int,
        *,
        counts: PassCounts | None = None,
        label_free: bool = False,
        prior: BetaPrior | None = None,
    ):
        """``counts``: the probe's (correct, k) per prompt, for the posterior estimate; without them
        (and not label-free) the pass rates 1 - difficulty are taken as exact, as in a simulation.
        ``prior``: an already fitted prior for these counts (fitted here, lazily, when None)."""
        difficulty = np.asarray(difficulty, dtype=np.float64)
        base_wrong = np.asarray(base_wrong, dtype=bool)
        if difficulty.ndim != 1 or base_wrong.shape != difficulty.shape:
            raise StrategyError("difficulty and base_wrong must be 1-D arrays of the same length")
        if counts is not None and (label_free or counts.k.shape != difficulty.shape):
            raise StrategyError("counts go with a pass-rate probe and need one (correct, k) per prompt")
        shuffle = seeded_shuffle(difficulty.size, seed)
        self.difficulty = difficulty
        self.base_wrong = base_wrong
        self.seed = seed
        shuffled = difficulty[shuffle]
        probed = ~np.isnan(shuffled)
        if not probed.all():
            shuffle, shuffled = shuffle[probed], shuffled[probed]
        if shuffled.size and (shuffled.min() < 0.0 or shuffled.max() > 1.0):
            raise StrategyError("difficulty values must lie in [0, 1] (NaN marks a prompt not probed)")
        self._shuffle = shuffle  # prompt index at each shuffled position
        self._difficulty_key = np.rint(shuffled * KEY_SCALE).astype(np.int64)
        self._rankings: dict[object, _Ranking] = {}
        self._picks: dict[tuple, np.ndarray] = {}
        self.counts = counts
        self.label_free = label_free
        self._prior = prior
        self._chances: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def strategies(self) -> tuple[str, ...]:
        """The strategies this pool supports: all but band and learnable when label-free."""
        if self.label_free:
            return tuple(s for s in STRATEGIES if s not in PASS_RATE_STRATEGIES)
        return STRATEGIES

    @property
    def prior(self) -> BetaPrior | None:
        """The Beta prior fitted to the probed prompts' counts (None without counts)."""
        if self._prior is None and self.counts is not None:
            probed = ~np.isnan(self.difficulty)
            self._prior = fit_prior(PassCounts(self.counts.correct[probed], self.counts.k[probed]))
        return self._prior

    def posterior_chance(self, group_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Per prompt (input order), given its counts and the fitted prior: posterior mean and
        variance of the chance that a group of ``group_size`` has mixed rewards. Needs counts."""
        g = check_group_size(group_size)
        if self.counts is None:
            raise StrategyError("the posterior chance needs the probe's (correct, k) counts")
        if g not in self._chances:
            self._chances[g] = learnable_chance_posterior(self.counts, g, self.prior)
        return self._chances[g]

    @property
    def eligible(self) -> int:
        """How many prompts can be picked at all (the probed ones)."""
        return self._shuffle.size

    def _ranking(self, name: str, group_size: int) -> _Ranking:
        if name == "learnable" and self.counts is not None:
            name = ("learnable", group_size)  # the posterior chance depends on G
        if name not in self._rankings:
            key = self._difficulty_key
            if name == "difficulty_ascending":
                self._rankings[name] = _Ranking(key)
            elif name == "difficulty_descending":
                self._rankings[name] = _Ranking(KEY_SCALE - key)
            elif name == "learnable":  # exact p: 1 - p^G - (1-p)^G falls with |p - 1/2|, for every G
                self._rankings[name] = _Ranking(np.abs(2 * key - KEY_SCALE))
            else:  # highest posterior chance first, at LEARNABLE_RESOLUTION
                self._rankings[name] = _Ranking(learnable_keys(self.posterior_chance(group_size)[0][self._shuffle]))
        return self._rankings[name]

    def pick(
        self,
        strategy: str,
        n: int,
        *,
        group_size: int = DEFAULT_GROUP_SIZE,
        band: tuple[float, float] = DEFAULT_BAND,
    ) -> np.ndarray:
        """Indices (int64, into the input arrays) of up to ``n`` prompts, most preferred first.

        base_wrong, base_right and band return fewer than ``n`` when fewer prompts qualify; all returns every
        probed prompt, in shuffled order, whatever ``n`` is. The group size
        changes only ``learnable`` with counts (the posterior chance depends on G); with exact
        pass rates it ranks by distance of p from 1/2, the same order for every G >= 2.
        Picks are memoised (read-only arrays). Label-free: band and learnable raise StrategyError.
        """
        _check_strategy(strategy)
        group_size = check_group_size(group_size)
        lo, hi = _check_band(band)
        n = self.eligible if strategy == WHOLE_POOL else min(_check_count(n), self.eligible)
        if strategy not in self.strategies:
            raise StrategyError(label_free_refusal(strategy))
        memo_key = (strategy, n, (lo, hi) if strategy == "band" else None,
                    group_size if strategy == "learnable" and self.counts is not None else None)
        if memo_key not in self._picks:
            picked = self._shuffle[self._positions(strategy, n, lo, hi, group_size)].astype(np.int64)
            picked.flags.writeable = False
            self._picks[memo_key] = picked
        return self._picks[memo_key]

    def _positions(self, strategy: str, n: int, lo: float, hi: float, group_size: int) -> np.ndarray:
        """Shuffled positions of the pick, most preferred first."""
        if strategy == "hard":
            return self._ranking("difficulty_descending", group_size).ranks(0, n)
        if strategy == "easy":
            return self._ranking("difficulty_ascending", group_size).ranks(0, n)
        if strategy == "learnable":
            return self._ranking("learnable", group_size).ranks(0, n)
        if strategy == "medium":
            size = self.eligible
            start = (size - n) // 2
            window = self._ranking("difficulty_ascending", group_size).ranks(start, start + n)
            # Closest to the middle rank first (lower rank on a tie), so a shorter medium pick is
            # the front of a longer one.
            distance = np.abs(2 * np.arange(start, start + n, dtype=np.int64) - (size - 1))
            return window[np.argsort(distance, kind="stable")]
        if strategy in ("random", WHOLE_POOL):
            return np.arange(n)
        if strategy == "base_wrong":
            return np.flatnonzero(self.base_wrong[self._shuffle])[:n]
        if strategy == "base_right":
            return np.flatnonzero(~self.base_wrong[self._shuffle])[:n]
        # band: pass rate p = 1 - difficulty within [lo, hi], compared at the keys' rounding
        pass_key = KEY_SCALE - self._difficulty_key
        inside = (pass_key >= round(lo * KEY_SCALE)) & (pass_key <= round(hi * KEY_SCALE))
        return np.flatnonzero(inside)[:n]


def select(
    strategy: str,
    *,
    difficulty: np.ndarray,
    base_wrong: np.ndarray,
    n: int,
    seed: int,
    group_size: int = DEFAULT_GROUP_SIZE,
    band: tuple[float, float] = DEFAULT_BAND,
    counts: PassCounts | None = None,
    label_free: bool = False,
) -> np.ndarray:
    """Indices of the prompts ``strategy`` picks for a budget of ``n``, most preferred first.

    ``counts`` and ``label_free`` as for ``Selector``. Use ``Selector`` directly to run several
    strategies on the same pool and seed.
    """
    _check_strategy(strategy)
    check_group_size(group_size)
    _check_band(band)
    _check_count(n)
    selector = Selector(difficulty, base_wrong, seed, counts=counts, label_free=label_free)
    return selector.pick(strategy, n, group_size=group_size, band=band)
