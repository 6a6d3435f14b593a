
from fastapi import APIRouter
from sqlmodel import Session, select

from backend.database import SessionDep
from backend.jobs import service
from backend.jobs.kinds import get_kind
from backend.jobs.schemas import JobEventRead, JobRead
from backend.jobs.tables import Job, JobStatus
from backend.params import Limit, Offset, PathId

router = APIRouter(tags=["jobs"])
JobId = PathId(Job, "Job")


def _read(session: Session, job: Job) -> JobRead:
    # A probe's progress unit is a prompt of k samples.
    return JobRead.of(job, samples_per_unit=get_kind(job.kind).samples_per_unit(session, job))


@router.get("/jobs")
def list_jobs(session: SessionDep, status: JobStatus | None = None, limit: Limit = 100,
              offset: Offset = 0) -> list[JobRead]:
    query = select(Job).order_by(Job.id.desc()).offset(offset).limit(limit)
    if status:
        query = query.where(Job.status == status)
    return [_read(session, job) for job in session.exec(query)]


@router.get("/jobs/{job_id}")
def get_job(job_id: JobId, session: SessionDep) -> JobRead:
    return _read(session, service.get_job(session, job_id))


@router.get("/jobs/{job_id}/events")
def job_events(job_id: JobId, session: SessionDep, limit: Limit = 500, offset: Offset = 0) -> list[JobEventRead]:
    """Oldest first."""
    service.get_job(session, job_id)
    return [JobEventRead.model_validate(e, from_attributes=True)
            for e in service.events(session, job_id, limit=limit, offset=offset)]


@router.post("/jobs/{job_id}/cancel", responses={409: {"description": "The job has already finished"}})
def cancel_job(job_id: JobId, session: SessionDep) -> JobRead:
    return _read(session, service.request_cancel(session, service.get_job(session, job_id)))
