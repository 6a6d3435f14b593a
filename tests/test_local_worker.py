"""serve's supervision of its local worker: the backoff and the reason logged (issue 7 §1). The real
SIGKILL-and-restart case runs against `budgetlab serve` in tests/test_embedded_default.py."""

import os
import signal
import time

from backend.local_worker import LocalWorker, describe_exit, restart_delay


def test_restart_delay_doubles_for_quick_exits_up_to_a_minute():
    assert [restart_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


def test_describe_exit_names_the_signal_or_the_code():
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(3) == "exited with code 3"


def test_a_process_that_keeps_dying_is_restarted_with_growing_pauses_and_stop_ends_it():
    said: list[tuple[float, str]] = []
    worker = LocalWorker(["-c", "import sys; sys.exit(3)"], log=lambda text: said.append((time.monotonic(), text)))
    worker.start()
    deadline = time.monotonic() + 30
    while len(said) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()
    assert len(said) >= 3 and all("exited with code 3; restarting it in" in text for _, text in said)
    assert [text.split("restarting it in ")[1][:4] for _, text in said[:3]] == ["1 s.", "2 s.", "4 s."]
    assert said[2][0] - said[1][0] >= 1.9  # the pause really was taken
    count = len(said)
    time.sleep(1.5)
    assert len(said) == count, "stop() must end the supervision"


def test_stop_terminates_a_running_worker():
    worker = LocalWorker(["-c", "import time; time.sleep(600)"], log=lambda _text: None)
    worker.start()
    time.sleep(0.3)
    pid = worker.pid
    worker.stop(timeout=10)
    assert worker.restarts == 0
    assert not os.path.exists(f"/proc/{pid}")  # terminated and reaped
