"""Failed sign-ins and bad credentials per client address, in a sliding window (this API process's memory).

The address is the one the server sees: behind a proxy every client shares the proxy's, so run uvicorn with
--proxy-headers (and --forwarded-allow-ips for the proxy) to limit each client on its own."""

import time
from collections import deque
from threading import Lock

WINDOW_SECONDS = 300.0
MAX_ADDRESSES = 10_000


class FailureLimiter:
    def __init__(self, allowed: int, window: float = WINDOW_SECONDS, clock=time.monotonic):
        self.allowed, self.window, self.clock = allowed, window, clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = Lock()

    def _recent(self, address: str, now: float) -> deque[float]:
        times = self._failures.setdefault(address, deque())
        while times and times[0] <= now - self.window:
            times.popleft()
        return times

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may try again, or None when it may now."""
        with self._lock:
            now = self.clock()
            times = self._recent(address, now)
            if len(times) < self.allowed:
                if not times:
                    self._failures.pop(address, None)
                return None
            return max(1, int(times[0] + self.window - now + 0.999))

    def fail(self, address: str) -> None:
        with self._lock:
            now = self.clock()
            if len(self._failures) > MAX_ADDRESSES:  # forget addresses whose window has passed
                for stale in [a for a, times in self._failures.items() if times[-1] <= now - self.window]:
                    del self._failures[stale]
            self._recent(address, now).append(now)
