from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import Session

from backend.jobs.schemas import JobRead
from backend.params import BodyId
from backend.probes.tables import Probe
from backend.runs.settings import PRESETS
from backend.runs.tables import Run
from backend.subsets.tables import Subset


class RunCreate(BaseModel):
    subset_id: BodyId(Subset, "Subset")
    preset: str | None = Field(None, description="paper or quick_cpu; settings override it field by field",
                               json_schema_extra={"enum": [*PRESETS, None]})  # checked by the service
    settings: dict[str, Any] = Field(default_factory=dict, description="TrainingSettings fields to set")
    allow_other_model: bool = Field(False, description="Train settings.model although the subset's probe used "
                                                       "another model (its difficulty forecast then does not apply)")


class RunRead(BaseModel):
    created_by: str | None = Field(None, description="The name of the user who created it (None: the system, "
                                                      "or before users existed)")
    id: int
    subset_id: int
    subset_name: str | None
    experiment_id: int | None
    strategy: str | None
    model: str
    probe_id: int | None
    probe_model: str | None = Field(description="The model the subset's probe was probed with")
    grading_policy: str | None = Field(description="How rewards and evaluation were graded")
    template: str | None = Field(description="The probe's prompt template (null: the chat template)")
    chat_template_options: dict[str, Any] | None
    forecast_applies: bool = Field(description="False when the run trains another model or grades otherwise than "
                                               "the probe, so the probe's difficulty forecast does not describe it")
    forecast_caveats: list[str]
    prompt_example: str | None = Field(description="The first training prompt as the worker rendered it")
    settings: dict[str, Any]
    seed: int
    eval_pool_id: int | None
    library_versions: dict[str, str]
    adapter_available: bool
    created_at: datetime
    job: JobRead

    @classmethod
    def of(cls, session: Session, run: Run) -> "RunRead":
        from backend.runs.service import forecast_caveats, run_job

        subset = session.get(Subset, run.subset_id)
        probe = session.get(Probe, subset.probe_id) if subset else None
        caveats = forecast_caveats(probe, run.settings)
        return cls(id=run.id, created_by=run.created_by, subset_id=run.subset_id,
                   subset_name=subset.name if subset else None,
                   experiment_id=run.experiment_id, strategy=subset.strategy if subset else None, model=run.model,
                   probe_id=probe.id if probe else None, probe_model=probe.model if probe else None,
                   grading_policy=run.settings.get("grading_policy") or (probe.grading_policy if probe else None),
                   template=probe.template if probe else None,
                   chat_template_options=probe.chat_template_options if probe else None,
                   forecast_applies=not caveats, forecast_caveats=caveats, prompt_example=run.prompt_example,
                   settings=run.settings, seed=run.seed, eval_pool_id=run.eval_pool_id,
                   library_versions=run.library_versions, adapter_available=run.adapter_path is not None,
                   created_at=run.created_at, job=JobRead.of(run_job(session, run)))


class MetricSeries(BaseModel):
    steps: list[int]
    values: list[float]


class RunMetrics(BaseModel):
    run_id: int
    keys: list[str]
    series: dict[str, MetricSeries]


class PromptMove(BaseModel):
    prompt_id: int
    external_id: str
    text: str
    correct_before: int
    k_before: int
    correct_after: int
    k_after: int


class TierGain(BaseModel):
    tier: str = Field(description="The prompts' tier under the base model: never, rarely (below 1/2), often, always")
    prompts: int
    pass_before: float
    pass_after: float
    gain: float


class MovedComparison(BaseModel):
    prompts: int = Field(description="Prompts both probes scored")
    tiers: list[str]
    transitions: list[list[int]] = Field(description="Prompts by tier before (rows) and after (columns)")
    by_tier: list[TierGain] = Field(description="Mean pass rate before and after, by tier before: where training "
                                                "helped (the capacity boundary)")
    pass_before: float | None
    pass_after: float | None
    newly_solved_count: int = Field(description="Prompts never solved before and solved at least once after")
    newly_solved: list[PromptMove] = Field(description="The first 50 of them, most solved after first")


class MovedScope(BaseModel):
    scope: str = Field(description="training: the run's subset; evaluation: its evaluation pool")
    probe_id: int = Field(description="The probe of the trained policy (base model + the run's adapter)")
    pool_id: int
    baseline_probe_id: int | None = Field(description="The base model's probe it is compared with")
    status: dict[str, str] = Field(description="Job status of the probe after training and of the baseline")
    comparison: MovedComparison | None = Field(description="Once both probes have succeeded")


class RunMoved(BaseModel):
    run_id: int
    scopes: list[MovedScope] = Field(description="Empty until the run is re-probed (POST /runs/{id}/reprobe)")
