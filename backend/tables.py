"""Every table, imported in one place so metadata (and Alembic) sees them all."""

from sqlmodel import SQLModel

from backend.auth.tables import ApiToken
from backend.experiments.tables import Experiment
from backend.jobs.tables import Job, JobEvent
from backend.labels.tables import LabelingExport, LabelJob, LabelSet, LabelStudioConnection, PromptLabel
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe, ProbeShard, PromptScore, Sample
from backend.runs.tables import Run, RunMetric
from backend.subsets.tables import Subset, SubsetMember
from backend.workers.tables import WorkerBeat

metadata = SQLModel.metadata

__all__ = ["ApiToken", "Experiment", "Job", "JobEvent", "LabelJob", "LabelSet", "LabelStudioConnection",
           "LabelingExport", "Pool", "Prompt", "Probe", "ProbeShard", "PromptScore", "Run",
           "PromptLabel", "RunMetric", "Sample", "Subset", "SubsetMember", "WorkerBeat",
           "metadata"]

# Ids are never reused: on SQLite a table without AUTOINCREMENT hands a deleted row's id to the
# next insert, and caches, exports and bookmarks that name an id would then point at a new row.
# (Postgres ids come from sequences, which never go back.) Declared once so no table can forget it.
for _table in metadata.tables.values():
    if "id" in _table.c and _table.c.id.primary_key:
        _table.dialect_kwargs["sqlite_autoincrement"] = True
