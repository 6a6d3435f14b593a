"""Request and response shapes of the pools API (the tables live in backend.pools.tables)."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from backend.pools.demo import DEMO_POOL_NAME

PromptOrder = Literal["position", "difficulty", "-difficulty"]


class PoolRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    created_by: str | None = Field(None, description="The name of the user who created it (None: the system, "
                                                      "or before users existed)")
    id: int
    name: str
    task_type: str = Field(description="numeric, math, choice or exact: how answers are graded")
    has_answers: bool = Field(description="False: the pool is probed in label-free mode")
    prompt_count: int
    source_filename: str | None
    source_format: str | None = Field(description="jsonl, csv, tsv, parquet, json, or generated (the demo pool)")
    created_at: datetime

    @computed_field(description="The generated demo pool: its probe preset and the one-click demo experiment apply")
    @property
    def is_demo(self) -> bool:
        return self.source_format == "generated" and self.name == DEMO_POOL_NAME


class ImportReport(BaseModel):
    """How an upload was read: the fields used (named or guessed) and the task type (given or detected,
    with what the detection saw)."""

    prompt_field: str
    answer_field: str | None = Field(description="null: no answers, the pool is label-free")
    id_field: str | None = Field(description="null: the rows are numbered")
    fields_guessed: bool = Field(description="True: no field was named; they were chosen from common names "
                                             "(prompt|question|problem|input|query, answer|target|solution|"
                                             "gold|label, id|unique_id|idx|qid)")
    task_type: str
    truncated_prompts: int = Field(0, description="Prompts cut to BUDGETLAB_MAX_PROMPT_CHARS (long_prompts=truncate)")
    task_type_detected: bool = Field(description="True: detected from the answers; False: given (task_type "
                                                 "or the preset)")
    task_type_reason: str = Field(description="why this task type, in words")

    def summary(self) -> str:
        """One line for people: what was read from where, and how it is graded."""
        how = "guessed" if self.fields_guessed else "named"
        answer = f"answer from {self.answer_field!r}" if self.answer_field else "no answers (label-free)"
        ids = f"ids from {self.id_field!r}" if self.id_field else "rows numbered"
        cut = (f" {self.truncated_prompts} prompt{'s' if self.truncated_prompts != 1 else ''} cut to the model's "
               f"context." if self.truncated_prompts else "")
        return (f"Fields ({how}): prompt from {self.prompt_field!r}, {answer}, {ids}. "
                f"Graded as {self.task_type}: {self.task_type_reason}.{cut}")


class PoolImported(PoolRead):
    """The pool an upload created, with how the file was read."""

    report: ImportReport


class PromptRead(BaseModel):
    """A prompt with its scores from the page's probe (null when that probe has not scored it)."""

    id: int
    position: int = Field(description="0-based order in the uploaded file")
    external_id: str
    text: str
    answer: str | None
    gold: str | None = Field(description="the answer normalised for grading")
    k: int | None = None
    correct_count: int | None = None
    pass_rate: float | None = None
    wilson_low: float | None = None
    wilson_high: float | None = None
    agreement: float | None = None
    majority_answer: str | None = None
    base_wrong: bool | None = None
    difficulty: float | None = None


class PromptPage(BaseModel):
    total: int = Field(description="prompts in the pool")
    limit: int
    offset: int
    order: PromptOrder
    probe_id: int | None = Field(description="the probe whose scores are shown; null when the pool has none")
    items: list[PromptRead]


class UploadForm(BaseModel):
    """The multipart fields of POST /api/pools (documented here; the body is read as a stream)."""

    file: bytes = Field(description="The pool file: JSONL, CSV, TSV, Parquet, or a BIG-Bench style JSON document")
    name: str | None = Field(None, description="Pool name; default: the file name")
    format: str | None = Field(None, description="jsonl, csv, tsv, parquet or json; default: from the file name")
    preset: str | None = Field(None, description="gsm8k, bbh or math500: fills the fields and the task type (bbh: "
                                                 "detected per file from its targets)")
    prompt_field: str | None = Field(None, description="Field holding the prompt. With no field named (and no "
                                                       "preset) all three are guessed from common names")
    answer_field: str | None = Field(None, description="Field holding the gold answer; name only prompt_field to "
                                                       "import a label-free pool")
    id_field: str | None = Field(None, description="Field holding a unique id; empty: rows are numbered")
    long_prompts: Literal["refuse", "truncate"] | None = Field(
        None, description="refuse (default): a prompt longer than the model's context (BUDGETLAB_MAX_PROMPT_CHARS) "
                          "fails the upload, with its lines; truncate: cut such prompts, counted in the report")
    task_type: str | None = Field(
        None, description="numeric, math, choice, exact, or auto (default): detected from the answers")
