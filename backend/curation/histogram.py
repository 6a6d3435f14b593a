"""Distribution of per-prompt values in [0, 1] (pass rate, difficulty, agreement) for charts."""

from __future__ import annotations

import numpy as np


def _probed(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64).ravel()
    return values[~np.isnan(values)]  # NaN marks a prompt not probed yet


def histogram(values: np.ndarray, bins: int = 10) -> dict:
    """Counts in ``bins`` equal bins over [0, 1]; 1.0 falls in the last bin, NaNs are left out.

    Values are clipped to [0, 1] first so float noise at the ends (1.0000000000000002) still counts.
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a whole number >= 1, got {bins!r}")
    edges = np.linspace(0.0, 1.0, int(bins) + 1)
    counts, _ = np.histogram(np.clip(_probed(values), 0.0, 1.0), bins=edges)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def summary(values: np.ndarray) -> dict:
    """Mean, share exactly at 0 and at 1, and count of the probed values (None when there are none)."""
    probed = _probed(values)
    count = int(probed.size)
    if count == 0:
        return {"mean": None, "share_at_0": None, "share_at_1": None, "count": 0}
    return {
        "mean": float(probed.mean()),
        "share_at_0": float(np.count_nonzero(np.isclose(probed, 0.0, rtol=0.0, atol=1e-12)) / count),
        "share_at_1": float(np.count_nonzero(np.isclose(probed, 1.0, rtol=0.0, atol=1e-12)) / count),
        "count": count,
    }
