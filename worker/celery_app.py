"""The Celery app. Light on purpose: the API imports it to enqueue tasks by name, and it never
imports torch, transformers or vLLM (the tasks import them lazily)."""

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
    app = Celery("budgetlab", broker=settings.celery_broker_url, include=["worker.tasks", "worker.training_task"])
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
