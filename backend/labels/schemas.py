from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.subsets.schemas import SelectionRequest

FileFormat = Literal["label-studio", "label-studio-config", "argilla", "csv", "jsonl"]
_FORMAT = ("label-studio: tasks JSON to import into a Label Studio project; label-studio-config: the labeling "
           "config (XML) that fits the pool's task type; argilla: a zip with an Argilla 2.x dataset "
           "(settings and records, for rg.Dataset.from_disk); csv / jsonl: a template with id, prompt, answer")


class LabelSetRead(BaseModel):
    id: int
    pool_id: int
    source: str
    format: str
    token_name: str | None
    label_count: int = Field(description="Prompts this import answered (changed or confirmed)")
    changed_count: int = Field(description="Of those, prompts that had another answer before")
    report: dict[str, Any]
    created_at: datetime
    undone_at: datetime | None
    undone_by: str | None


class LabelingExportRead(BaseModel):
    id: int
    pool_id: int
    subset_id: int | None
    format: str
    prompt_count: int
    label_studio_project_id: int | None
    label_studio_url: str | None
    job_id: int | None
    token_name: str | None
    created_at: datetime


class PoolLabelsRead(BaseModel):
    pool_id: int
    labeled: int = Field(description="Prompts with an answer")
    unlabeled: int
    imported_labels: int = Field(description="Prompts whose answer came from an import still in effect")
    cost_per_label: float | None
    spent: float | None = Field(description="imported_labels x cost_per_label; None without a cost per label")
    label_sets: list[LabelSetRead] = Field(description="Newest first")
    exports: list[LabelingExportRead] = Field(description="What was sent for labeling, newest first")


class LabelImportRead(BaseModel):
    report: dict[str, Any] = Field(description="matched, unknown ids, empty answers, ungradeable answers, "
                                               "disagreements (settled by majority), ties (not imported), new, "
                                               "changed, unchanged; regraded or regrade_job_id")
    label_set: LabelSetRead | None = Field(description="None for a dry run, or when no answer changed")


class LabelingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cost_per_label: float | None = Field(ge=0, le=1e9, description="What one label costs; None to clear")


class LabelStudioSave(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1, max_length=2000, description="e.g. http://localhost:8080")
    api_key: str = Field(min_length=1, max_length=4000, description="Stored on the server; never returned")


class LabelStudioRead(BaseModel):
    configured: bool
    url: str | None
    updated_at: datetime | None
    updated_by: str | None


class SelectionExport(SelectionRequest):
    format: FileFormat = Field("label-studio", description=_FORMAT)


class TrustRead(BaseModel):
    probe_id: int
    source_probe_id: int = Field(description="The probe whose labeled prompts were compared")
    comparable: bool = Field(description="True: measured on another probe with the same model and settings")
    prompts: int = Field(description="Labeled prompts compared")
    n: int = Field(description="The budget the overlap is measured at")
    rho: float | None = Field(description="Spearman rho of 1 - agreement against 1 - pass rate")
    rho_low: float | None
    rho_high: float | None
    jaccard: float = Field(description="Expected Jaccard of the two hard-n picks (ties broken at random)")
    recall: float = Field(description="Expected share of the hard-n by pass rate that the agreement pick finds")
    chance_recall: float
    chance_jaccard: float
    best_recall: float = Field(description="What a second pass-rate pick would score: the ceiling ties allow")
    best_jaccard: float
    mean_pass_rate: float
    mixed_share: float = Field(description="Share of prompts with 0 < pass rate < 1")
    warning: str | None = Field(description="Set when rho < 0.4: a label-free pick is close to random")
    note: str | None
    figure: dict
