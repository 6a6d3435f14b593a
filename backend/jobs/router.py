from fastapi import APIRouter
from sqlmodel import select

from backend.database import SessionDep
from backend.jobs import service
from backend.jobs.schemas import JobEventRead, JobRead
from backend.jobs.tables import Job

router = APIRouter(tags=["jobs"])


@router.get("/jobs")
def list_jobs(session: SessionDep, status: str | None = None, limit: int = 100) -> list[JobRead]:
    query = select(Job).order_by(Job.id.desc()).limit(min(limit, 1000))
    if status:
        query = query.where(Job.status == status)
    return [JobRead.of(job) for job in session.exec(query)]


@router.get("/jobs/{job_id}")
def get_job(job_id: int, session: SessionDep) -> JobRead:
    return JobRead.of(service.get_job(session, job_id))


@router.get("/jobs/{job_id}/events")
def job_events(job_id: int, session: SessionDep) -> list[JobEventRead]:
    service.get_job(session, job_id)
    return [JobEventRead.model_validate(e, from_attributes=True) for e in service.events(session, job_id)]


@router.post("/jobs/{job_id}/cancel")
def cancel_job(job_id: int, session: SessionDep) -> JobRead:
    return JobRead.of(service.request_cancel(session, service.get_job(session, job_id)))
