"""`budgetlab serve`'s own worker process, supervised: if it exits (a crash, an OOM kill, a SIGKILL),
it is started again after a backoff, and the reason is logged. Jobs queued meanwhile wait in the
broker and run when it is back."""

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

MIN_DELAY = 1.0
MAX_DELAY = 60.0
# A worker that ran this long before exiting was healthy: the next restart waits MIN_DELAY again.
STABLE_AFTER = 60.0


def restart_delay(quick_failures: int, minimum: float = MIN_DELAY, maximum: float = MAX_DELAY) -> float:
    """1 s, 2 s, 4 s, ... up to a minute, for each exit in a row that came soon after a start."""
    return min(maximum, minimum * 2 ** max(0, quick_failures - 1))


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


class LocalWorker:
    def __init__(self, args: Sequence[str], log: Callable[[str], None]):
        self._args = list(args)
        self._log = log
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._supervise, name="local-worker-supervisor", daemon=True)
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        with self._lock:
            if not self._stopping.is_set():
                self._proc = subprocess.Popen([sys.executable, *self._args])

    def _supervise(self) -> None:
        quick_failures = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            returncode = self._proc.wait()
            if self._stopping.is_set():
                return
            quick_failures = 1 if time.monotonic() - started >= STABLE_AFTER else quick_failures + 1
            delay = restart_delay(quick_failures)
            self._log(f"The local worker (pid {self._proc.pid}) {describe_exit(returncode)}; "
                      f"restarting it in {delay:.0f} s. Queued jobs wait in the broker meanwhile.")
            if self._stopping.wait(delay):
                return
            self._spawn()
            self.restarts += 1

    def stop(self, timeout: float = 60) -> None:
        """Stop supervising, then stop the worker: SIGTERM (it finishes its current step), SIGKILL after
        `timeout` seconds."""
        with self._lock:
            self._stopping.set()
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
