"""Presets: the field mapping, task type and format of well-known datasets, so their files import as
they are published, with no preprocessing.

- ``gsm8k``: GSM8K's JSONL, ``{"question", "answer"}``; the answer is a worked solution ending in
  ``#### N``, graded as a number.
- ``bbh``: a BIG-Bench Hard task file, one JSON document ``{"examples": [{"input", "target"}]}``.
  The 27 tasks grade differently, so the task type is detected per file from its targets: letters
  ``(A)``..``(R)`` -> choice; numbers (multistep_arithmetic_two, object_counting) -> numeric; labels
  (True/False, Yes/No, valid/invalid) and free text (word_sorting, dyck_languages) -> exact.
- ``math500``: MATH-500's JSONL, ``{"problem", "answer", "unique_id", ...}``; LaTeX answers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from backend.pools.ingest import FieldMapping, IngestError


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    mapping: FieldMapping
    task_type: str | None  # None: detected from the file's answers
    format: str


PRESETS: dict[str, Preset] = {
    "gsm8k": Preset("gsm8k", "GSM8K (JSONL: question, answer ending in #### N)",
                    FieldMapping(prompt_field="question", answer_field="answer"), "numeric", "jsonl"),
    "bbh": Preset("bbh", 'BIG-Bench Hard (JSON: {"examples": [{"input", "target"}]})',
                  FieldMapping(prompt_field="input", answer_field="target"), None, "json"),
    "math500": Preset("math500", "MATH-500 (JSONL: problem, answer, unique_id)",
                      FieldMapping(prompt_field="problem", answer_field="answer", id_field="unique_id"),
                      "math", "jsonl"),
}


def get_preset(name: str) -> Preset:
    preset = PRESETS.get(name.strip().lower())
    if preset is None:
        raise IngestError(422, f"Unknown preset {name!r}; use one of {', '.join(PRESETS)} or leave preset empty "
                               f"and map the fields yourself.")
    return preset


def resolve_upload_options(
    preset: str | None,
    *,
    prompt_field: str | None = None,
    answer_field: str | None = None,
    id_field: str | None = None,
    task_type: str | None = None,
) -> tuple[FieldMapping, str | None, str | None]:
    """(mapping, task type or None for "detect", format fallback). Fields and task type the user sends
    win over the preset's. Without a preset: no field named -> guessed from the file's fields (see
    `guess_mapping`); otherwise the prompt field defaults to "prompt" and the others are left out."""
    chosen = get_preset(preset) if preset else None
    if task_type == "auto":
        task_type = None
    if chosen is None and not (prompt_field or answer_field or id_field):
        return FieldMapping(guess=True), task_type, None
    base = chosen.mapping if chosen else FieldMapping()
    mapping = FieldMapping(
        prompt_field=prompt_field or base.prompt_field,
        answer_field=answer_field if answer_field else base.answer_field,
        id_field=id_field if id_field else base.id_field,
    )
    if task_type is None:
        task_type = chosen.task_type if chosen else None
    return mapping, task_type, chosen.format if chosen else None


def suggest_preset(fields: Iterable[str]) -> str | None:
    """The preset whose fields a file has, to suggest it when the mapping does not fit."""
    present = set(fields)
    for preset in PRESETS.values():
        mapped = {f for f in (preset.mapping.prompt_field, preset.mapping.answer_field) if f}
        if mapped <= present:
            return preset.name
    return None
