"""Time limits sized from the work: tokens to generate at the slowest rate we plan for, plus a floor."""

from backend.settings import get_settings

HARD_GRACE = 0.25  # the hard limit gives the soft one this much more (at least 5 minutes) to stop cleanly


def limits_for_tokens(tokens: float) -> tuple[float, float]:
    settings = get_settings()
    soft = settings.time_limit_floor_seconds + tokens / settings.slowest_tokens_per_second
    return soft, soft + max(300.0, HARD_GRACE * soft)
