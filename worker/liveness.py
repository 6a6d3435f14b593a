"""The worker's beat: while a worker process consumes tasks, a thread writes its row in
`worker_beat` every BUDGETLAB_WORKER_BEAT_SECONDS, so `/api/health` and the pages can tell whether
anyone will run queued jobs. A clean shutdown removes the row; a killed worker's row goes stale."""

import logging
import os
import socket
import threading

from celery import signals

from backend.database import session_scope
from backend.settings import get_settings
from backend.workers.service import record_beat, remove_beat

log = logging.getLogger(__name__)

_stop = threading.Event()
_NAME = f"{socket.gethostname()}:{os.getpid()}"


def _beat_forever(queues: str, interval: float) -> None:
    while not _stop.is_set():
        try:
            with session_scope() as session:
                record_beat(session, _NAME, socket.gethostname(), os.getpid(), queues)
        except Exception:  # a database hiccup must not kill the worker; the next beat tries again
            log.exception("could not record the worker beat")
        _stop.wait(interval)


@signals.worker_ready.connect
def _start_beating(sender=None, **_kwargs) -> None:
    queues = ",".join(sorted(q.name for q in sender.app.amqp.queues.consume_from.values())) if sender else ""
    threading.Thread(target=_beat_forever, args=(queues, get_settings().worker_beat_seconds),
                     name="worker-beat", daemon=True).start()


@signals.worker_shutdown.connect
def _stop_beating(**_kwargs) -> None:
    _stop.set()
    try:
        with session_scope() as session:
            remove_beat(session, _NAME)
    except Exception:
        log.exception("could not remove the worker beat")
