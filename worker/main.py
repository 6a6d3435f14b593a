"""Entry point for `celery -A worker.main worker`."""

import worker.liveness  # noqa: F401  (connects the beat to the worker's start and shutdown signals)
from worker.celery_app import get_celery

app = get_celery()
