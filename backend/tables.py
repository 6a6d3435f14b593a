"""Every table, imported in one place so metadata (and Alembic) sees them all."""

from sqlalchemy import select
from sqlalchemy.orm import column_property
from sqlmodel import SQLModel

from backend.audit.tables import AuditEvent
from backend.auth.tables import ApiToken, User, UserSession
from backend.experiments.tables import Experiment
from backend.jobs.tables import Job, JobEvent
from backend.labels.tables import LabelingExport, LabelJob, LabelSet, LabelStudioConnection, PromptLabel
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe, ProbeShard, PromptScore, Sample
from backend.runs.tables import Run, RunMetric
from backend.subsets.tables import Subset, SubsetMember
from backend.workers.tables import WorkerBeat

metadata = SQLModel.metadata

__all__ = ["ApiToken", "AuditEvent", "User", "UserSession", "Experiment",
           "Job", "JobEvent", "LabelJob", "LabelSet", "LabelStudioConnection",
           "LabelingExport", "Pool", "Prompt", "Probe", "ProbeShard", "PromptScore", "Run",
           "PromptLabel", "RunMetric", "Sample", "Subset", "SubsetMember", "WorkerBeat",
           "metadata"]

# Ids are never reused: on SQLite a table without AUTOINCREMENT hands a deleted row's id to the
# next insert, and caches, exports and bookmarks that name an id would then point at a new row.
# (Postgres ids come from sequences, which never go back.) Declared once so no table can forget it.
for _table in metadata.tables.values():
    if "id" in _table.c and _table.c.id.primary_key:
        _table.dialect_kwargs["sqlite_autoincrement"] = True


# Rows that record their creator also read the creator's name (`created_by`), loaded with the row by a
# subquery: pages show who created what, and lists need no query per row.
for _table in (Pool, Probe, Subset, Run, Experiment, Job, LabelSet):
    _table.__mapper__.add_property("created_by", column_property(
        select(User.name).where(User.id == _table.created_by_id).correlate_except(User).scalar_subquery()))
