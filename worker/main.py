"""Entry point for `celery -A worker.main worker`."""

import worker.liveness
import worker.tasks  # noqa: F401  (one task per job kind)
from backend.jobs.broker import get_celery

app = get_celery()
