"""Advice by regime: from a probe's difficulty profile and each strategy's forecast at the budget, which regime
the pool is in and what the two papers would predict. Pure: numbers in, words out.

- *Hard Examples Are All You Need* (Pikus, Tiwari, Ye, 2025): with a budget, train on the prompts the model
  fails most, as long as it can sometimes solve them; GRPO learns only from groups whose rewards differ.
- *Limits of Difficulty Scaling* (April 2026): for small models the hardest tier plateaus, and lower tiers
  match full-data accuracy with ~45% of the steps.

Regimes (pass rates p of the probed prompts; "hard's share" is the predicted learnable share of the hard pick):
- ``beyond_reach``: hard's share is below 0.2, or the model solves almost nothing (mean pass rate below 0.05,
  where the forecast rests on the prior more than on the counts): hard trains on little;
- ``within_reach``: hard's share is at least 0.2 and most prompts are not always solved: hard carries signal;
- ``saturated``: half or more of the prompts are always solved: easy picks carry no signal.
These are predictions to test with an experiment, not verdicts: training moves pass rates.
"""

from __future__ import annotations

REACH = 0.2  # hard's predicted learnable share below which its picks are mostly signal-free
HOPELESS = 0.05  # mean pass rate below which the pool as a whole is beyond the model
SATURATED = 0.5  # share of prompts always solved from which the pool is mostly too easy


def regime_advice(summary: dict, rows: list[dict]) -> dict | None:
    """``summary``: the probe's pass-rate summary (mean, share_at_0, share_at_1, count); ``rows``: each
    strategy's pick at the budget (strategy, predicted_learnable_share, mean_pass_rate). None without pass rates."""
    forecasts = {row["strategy"]: row["predicted_learnable_share"] for row in rows}
    hard, easy = forecasts.get("hard"), forecasts.get("easy")
    if not summary.get("count") or hard is None or summary.get("mean") is None:
        return None
    hard_pass = next((row["mean_pass_rate"] for row in rows if row["strategy"] == "hard"), None)
    never, always, mean = summary["share_at_0"], summary["share_at_1"], summary["mean"]
    best = max((s for s in forecasts if forecasts[s] is not None and s != "all"), key=lambda s: forecasts[s])
    profile = (f"Mean pass rate {mean:.2f}; {never:.0%} of the prompts never solved, {always:.0%} always solved. "
               f"Predicted learnable share at this budget: hard {hard:.0%}, {best} {forecasts[best]:.0%}.")
    if always >= SATURATED:
        regime, prediction = "saturated", (
            "The model already solves most prompts: easy picks are always solved and carry no GRPO signal. Hard "
            "Examples Are All You Need predicts hard (or learnable) gains the most here.")
    elif hard < REACH or mean < HOPELESS:
        regime, prediction = "beyond_reach", (
            "The hardest prompts are beyond the model's reach: most hard picks are never solved, their groups are "
            "all wrong, and GRPO learns nothing from them. Limits of Difficulty Scaling predicts hard gains "
            f"little here, and {best} or easier tiers reach the same accuracy in fewer steps.")
    else:
        reach = ("The hardest picks were never solved in k samples, but prompts like them sometimes are (the "
                 "forecast reads the whole pool's profile), so they likely carry signal." if hard_pass == 0 else
                 f"The model sometimes solves even the hardest picks (mean pass rate {hard_pass:.2f}), so they "
                 "carry signal.")
        easy_note = (" and easy gains least (its picks are mostly solved already, less signal)"
                     if easy is not None and easy < hard else "")
        regime, prediction = "within_reach", (
            f"{reach} Hard Examples Are All You Need predicts hard beats easy at this budget{easy_note}.")
    return {"regime": regime, "profile": profile, "prediction": prediction,
            "test": "A prediction, not a verdict: training moves pass rates. Test it with an experiment comparing "
                    f"hard, easy, random and {best if best not in ('hard', 'easy', 'random') else 'learnable'}."}
