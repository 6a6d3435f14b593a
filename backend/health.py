"""GET /api/health: is the API up, is any worker alive to run jobs, and how much work waits.

Public (no token) so a load balancer and the sign-in page can read it; it shows counts, not names."""

import logging

from fastapi import APIRouter
from pydantic import BaseModel, Field

from backend.database import SessionDep
from backend.settings import get_settings
from backend.workers.service import alive_workers

log = logging.getLogger(__name__)
router = APIRouter(tags=["health"])


class WorkersHealth(BaseModel):
    alive: int = Field(description="Worker processes that said they are alive in the last 3 beats")
    queues: list[str] = Field(description="Queues those workers consume")


class BrokerHealth(BaseModel):
    reachable: bool
    queue_depth: dict[str, int] | None = Field(None, description="Tasks waiting per queue (cpu, gpu)")
    error: str | None = None


class Health(BaseModel):
    status: str = Field(description="'ok', or 'degraded' when no worker is alive or the broker is unreachable")
    workers: WorkersHealth
    broker: BrokerHealth
    message: str | None = Field(None, description="What a user should know, e.g. that jobs will wait")


def _broker_health() -> BrokerHealth:
    from backend.jobs.broker import queue_depths

    try:
        return BrokerHealth(reachable=True, queue_depth=queue_depths())
    except Exception:  # any failure to reach it is the answer, not an error of this endpoint
        # The health check is public: the broker's address stays in the log.
        log.warning("health: the broker cannot be reached", exc_info=True)
        return BrokerHealth(reachable=False, error="The broker cannot be reached; the API log has the details.")


@router.get("/health")
def health(session: SessionDep) -> Health:
    workers = alive_workers(session, get_settings().worker_beat_seconds)
    queues = sorted({q for w in workers for q in w.queues.split(",") if q})
    broker = _broker_health()
    message = None
    if not workers:
        waiting = sum((broker.queue_depth or {}).values())
        message = ("No worker is running: jobs will wait until a worker runs"
                   + (f" ({waiting} task{'s' if waiting != 1 else ''} waiting)." if waiting else ".")
                   + " Start one with `budgetlab worker` (or restart `budgetlab serve`).")
    elif not broker.reachable:
        message = "The broker cannot be reached, so new jobs cannot be queued; the API log has the details."
    return Health(status="ok" if workers and broker.reachable else "degraded",
                  workers=WorkersHealth(alive=len(workers), queues=queues), broker=broker, message=message)
