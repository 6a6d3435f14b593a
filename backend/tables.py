"""Every table, imported in one place so metadata (and Alembic) sees them all."""

from sqlmodel import SQLModel

from backend.auth.tables import ApiToken
from backend.experiments.tables import Experiment
from backend.jobs.tables import Job, JobEvent
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe, ProbeShard, PromptScore, Sample
from backend.runs.tables import Run, RunMetric
from backend.subsets.tables import Subset, SubsetMember

metadata = SQLModel.metadata

__all__ = ["ApiToken", "Experiment", "Job", "JobEvent", "Pool", "Prompt", "Probe", "ProbeShard", "PromptScore", "Run",
           "RunMetric", "Sample", "Subset", "SubsetMember", "metadata"]
