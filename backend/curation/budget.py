"""Turn a budget (a count, a fraction of the pool, or money) into N, the number of prompts to pick."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal


class BudgetError(ValueError):
    """A budget that cannot be turned into a prompt count; the message says how to fix it."""


@dataclass(frozen=True)
class Budget:
    """N prompts to pick; ``requested`` is what the budget asked for before clamping to the pool."""

    n: int
    requested: int
    clamped: bool
    warning: str | None


def _exact(value: float, name: str) -> Decimal:
    # Decimal(str(x)) keeps the number the user typed: 0.3 / 0.1 is exactly 3, not 2.9999999999999996.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BudgetError(f"{name} must be a finite number, got {value!r}")
    return Decimal(str(value))


def budget_to_count(
    pool_size: int,
    *,
    count: int | None = None,
    fraction: float | None = None,
    money: float | None = None,
    cost_per_prompt: float | None = None,
) -> Budget:
    """N for a pool of ``pool_size`` prompts from exactly one of count, fraction or money.

    fraction in (0, 1] gives floor(fraction * pool_size), at least 1 for a non-empty pool;
    money gives floor(money / cost_per_prompt). A request above the pool size is clamped to the
    pool with a warning. A budget that buys no prompt at all is an error, not an empty subset.
    """
    if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 0:
        raise BudgetError(f"pool size must be a whole number of prompts >= 0, got {pool_size!r}")
    kinds = (("count", count), ("fraction", fraction), ("money", money))
    given = [name for name, value in kinds if value is not None]
    if len(given) != 1:
        received = ", ".join(given) if given else "none"
        raise BudgetError(f"give exactly one of count, fraction or money (received: {received})")
    if cost_per_prompt is not None and money is None:
        raise BudgetError("cost_per_prompt only applies to a money budget; give money as well, or drop it")

    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int):
            raise BudgetError(f"count must be a whole number of prompts, got {count!r}")
        if count < 1:
            raise BudgetError(f"count must be at least 1, got {count}")
        requested = count
    elif fraction is not None:
        share = _exact(fraction, "fraction")
        if not 0 < share <= 1:
            raise BudgetError(f"fraction must be in (0, 1], e.g. 0.1 for 10% of the pool; got {fraction}")
        requested = int((share * pool_size).to_integral_value(rounding=ROUND_FLOOR))
        if pool_size > 0:
            requested = max(1, requested)
    else:
        amount = _exact(money, "money")
        if cost_per_prompt is None:
            raise BudgetError("a money budget needs cost_per_prompt, the price of labelling one prompt")
        cost = _exact(cost_per_prompt, "cost_per_prompt")
        if amount <= 0:
            raise BudgetError(f"money must be more than 0, got {money}")
        if cost <= 0:
            raise BudgetError(f"cost_per_prompt must be more than 0, got {cost_per_prompt}")
        requested = int((amount / cost).to_integral_value(rounding=ROUND_FLOOR))
        if requested < 1:
            raise BudgetError(
                f"a budget of {money} at {cost_per_prompt} per prompt buys no prompt; "
                "raise the budget or lower the cost per prompt"
            )

    if requested > pool_size:
        warning = f"Requested {requested} prompts but the pool has only {pool_size}; clamped to {pool_size}."
        return Budget(n=pool_size, requested=requested, clamped=True, warning=warning)
    return Budget(n=requested, requested=requested, clamped=False, warning=None)
