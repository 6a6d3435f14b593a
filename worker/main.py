"""Entry point for `celery -A worker.main worker`."""

from worker.celery_app import get_celery

app = get_celery()
