"""Presets: the field mapping, task type and format of well-known datasets, so their files import as
they are published, with no preprocessing.

- ``gsm8k``: GSM8K's JSONL, ``{"question", "answer"}``; the answer is a worked solution ending in
  ``#### N``, graded as a number.
- ``bbh``: a BIG-Bench Hard task file, one JSON document ``{"examples": [{"input", "target"}]}``;
  targets are letters ``(A)``..``(G)``.
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
    task_type: str
    format: str


PRESETS: dict[str, Preset] = {
    "gsm8k": Preset("gsm8k", "GSM8K (JSONL: question, answer ending in #### N)",
                    FieldMapping(prompt_field="question", answer_field="answer"), "numeric", "jsonl"),
    "bbh": Preset("bbh", 'BIG-Bench Hard (JSON: {"examples": [{"input", "target"}]})',
                  FieldMapping(prompt_field="input", answer_field="target"), "choice", "json"),
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
    win over the preset's; without a preset the prompt field defaults to "prompt"."""
    chosen = get_preset(preset) if preset else None
    base = chosen.mapping if chosen else FieldMapping()
    mapping = FieldMapping(
        prompt_field=prompt_field or base.prompt_field,
        answer_field=answer_field if answer_field else base.answer_field,
        id_field=id_field if id_field else base.id_field,
    )
    if task_type is None or task_type == "auto":
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
