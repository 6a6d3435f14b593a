from datetime import datetime

from pydantic import BaseModel

from backend.jobs.tables import Job
from backend.timeutil import utcnow


class JobRead(BaseModel):
    id: int
    kind: str
    status: str
    progress_done: int
    progress_total: int
    message: str
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    samples_per_second: float | None = None
    eta_seconds: float | None = None

    @classmethod
    def of(cls, job: Job, samples_per_unit: int | None = None) -> "JobRead":
        """`samples_per_unit`: samples per progress unit (k for a probe), to report samples/s."""
        read = cls.model_validate(job, from_attributes=True)
        # Rate and time left from progress so far; advisory, like the progress itself.
        if job.status in ("running", "cancelling") and job.started_at and job.progress_done > 0:
            elapsed = max((utcnow() - job.started_at).total_seconds(), 1e-6)
            remaining = max(job.progress_total - job.progress_done, 0)
            read.eta_seconds = round(elapsed / job.progress_done * remaining, 1)
            if samples_per_unit:
                read.samples_per_second = round(job.progress_done * samples_per_unit / elapsed, 2)
        return read


class JobEventRead(BaseModel):
    from_status: str | None
    to_status: str
    reason: str
    at: datetime
