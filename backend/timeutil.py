from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_duration(seconds: float) -> str:
    """A short human duration for progress messages: "45s", "3m 20s", "2h 5m"."""
    seconds = int(max(0, seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60}m"
    if seconds >= 60:
        return f"{seconds // 60}m {seconds % 60}s"
    return f"{seconds}s"
