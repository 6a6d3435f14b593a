"""The Celery app and the broker. Light on purpose: the API uses it to send tasks by name, and it never
imports torch, transformers or vLLM. The worker registers the kinds' tasks on it (worker.tasks)."""

import time
from functools import lru_cache

from celery import Celery

from backend.settings import get_settings

QUEUES = ("cpu", "gpu")


@lru_cache
def get_celery() -> Celery:
    settings = get_settings()
    if settings.is_sqlite or settings.celery_broker_url.startswith("sqla+sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    app = Celery("budgetlab", broker=settings.celery_broker_url)
    app.conf.update(
        task_ignore_result=True,  # the database is the ledger; Celery results are not used
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue="cpu",
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    if settings.celery_broker_url.startswith("redis"):
        # Above the longest task, so Redis does not hand a running shard to a second worker. A task whose
        # worker died is not left to this timeout: its lease expires and the reconciler sends it again.
        app.conf.broker_transport_options = {"visibility_timeout": 12 * 3600,
                                             "global_keyprefix": settings.broker_key_prefix}
    return app


def send(task_name: str, queue: str, task_id: int, *, soft_limit: float, hard_limit: float) -> None:
    """Send one job task by name with its id only (backend.jobs.dispatch calls this after the commit).
    The time limits apply in prefork workers; the engine and the reconciler enforce them in any pool."""
    get_celery().send_task(task_name, args=[task_id], queue=queue, soft_time_limit=soft_limit,
                           time_limit=hard_limit)


def _is_sqlite_broker() -> bool:
    return get_celery().conf.broker_url.startswith("sqla+")


def declare_queues() -> None:
    """Create the broker's queues before any API or worker process uses them. On the SQLite broker,
    kombu creates a queue row on first use, and an API publishing while a worker declares the same
    queue raced into `UNIQUE constraint failed: kombu_queue.name`, which killed the worker at start.
    Declared here once, both only ever find the row. (Redis needs nothing: its queues are keys.)"""
    if not _is_sqlite_broker():
        return
    from kombu import Queue
    from sqlalchemy.exc import IntegrityError, OperationalError

    for attempt in range(5):
        try:
            with get_celery().connection_for_write() as connection:
                for name in QUEUES:
                    Queue(name, routing_key=name).bind(connection.default_channel).declare()
            return
        except (IntegrityError, OperationalError):  # declared at the same moment, or the file is locked
            if attempt == 4:
                raise
            time.sleep(0.2 * 2**attempt)


def queue_depths() -> dict[str, int]:
    """Messages waiting in each queue (not counting those a worker holds). Raises when the broker
    cannot be reached within a few seconds."""
    with get_celery().connection_for_read() as connection:
        connection.ensure_connection(max_retries=1, timeout=3)
        channel = connection.default_channel
        # kombu's virtual transports (Redis, SQLAlchemy) count a queue's pending messages this way.
        return {name: int(channel._size(name)) for name in QUEUES}
