"""What moved after training: each prompt's tier before (the base model's probe) and after (the trained policy's
probe with the same settings), as a transition table, the pass rate by the base tier (the capacity boundary:
where did training help?), and the prompts that went from never solved to solved at least once."""

from __future__ import annotations

import numpy as np

TIERS = ("never", "rarely", "often", "always")  # 0; below 1/2; 1/2 or more; k of k


def tiers(correct: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Each prompt's tier index in TIERS from its correct samples out of k."""
    correct, k = np.asarray(correct), np.asarray(k)
    return np.select([correct == 0, correct == k, 2 * correct < k], [0, 3, 1], default=2)


def compare(before_correct, before_k, after_correct, after_k) -> dict:
    """Transition counts (rows: tier before, columns: tier after), and per tier before: prompts, mean pass rate
    before and after, and the gain; plus which prompts (indices) were never solved before and solved after."""
    before_correct, before_k = np.asarray(before_correct), np.asarray(before_k)
    after_correct, after_k = np.asarray(after_correct), np.asarray(after_k)
    before_tier, after_tier = tiers(before_correct, before_k), tiers(after_correct, after_k)
    counts = np.zeros((len(TIERS), len(TIERS)), dtype=int)
    np.add.at(counts, (before_tier, after_tier), 1)
    before_rate, after_rate = before_correct / before_k, after_correct / after_k
    by_tier = []
    for index, name in enumerate(TIERS):
        mine = before_tier == index
        if mine.any():
            by_tier.append({"tier": name, "prompts": int(mine.sum()), "pass_before": float(before_rate[mine].mean()),
                            "pass_after": float(after_rate[mine].mean()),
                            "gain": float(after_rate[mine].mean() - before_rate[mine].mean())})
    return {"tiers": list(TIERS), "transitions": counts.tolist(), "by_tier": by_tier,
            "pass_before": float(before_rate.mean()) if before_rate.size else None,
            "pass_after": float(after_rate.mean()) if after_rate.size else None,
            "newly_solved": np.flatnonzero((before_tier == 0) & (after_tier > 0)).tolist()}
