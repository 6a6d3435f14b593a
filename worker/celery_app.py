"""The Celery app. Light on purpose: the API imports it to enqueue tasks by name, and it never
imports torch, transformers or vLLM (the tasks import them lazily)."""

import time
from functools import lru_cache

from celery import Celery

from backend.settings import get_settings

PROBE_SHARD_TASK = "budgetlab.probe_shard"
QUEUES = ("cpu", "gpu")


@lru_cache
def get_celery() -> Celery:
    settings = get_settings()
    if settings.is_sqlite or settings.celery_broker_url.startswith("sqla+sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    app = Celery("budgetlab", broker=settings.celery_broker_url,
                 include=["worker.tasks", "worker.training_task", "worker.labeling_task"])
    app.conf.update(
        task_ignore_result=True,  # the database is the ledger; Celery results are not used
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue="cpu",
        task_routes={PROBE_SHARD_TASK: {"queue": "gpu"}, "budgetlab.train_run": {"queue": "gpu"}},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    if settings.celery_broker_url.startswith("redis"):
        # Above the longest task, so Redis does not hand a running shard to a second worker.
        app.conf.broker_transport_options = {"visibility_timeout": 12 * 3600,
                                             "global_keyprefix": settings.broker_key_prefix}
    return app


def enqueue(task_name: str, *args: int) -> None:
    """Send a task by name with ids only; the caller has already committed the rows it refers to."""
    get_celery().send_task(task_name, args=list(args))


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
