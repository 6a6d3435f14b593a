"""Labeling file formats: what we hand annotators, and how we read their answers back.

Pure: bytes and lists in, bytes and dataclasses out; no database, no HTTP.

Exports (one row per chosen prompt, each carrying its Budgetlab id so the answers can come back):

- Label Studio: `label_studio_config` (the labeling config XML: a ``<Text>`` showing ``$prompt`` and
  a ``<TextArea name="answer">``, or ``<Choices name="answer" choice="single">`` for choice pools)
  and `label_studio_tasks` (the task list Label Studio imports as is, ``[{"data": {...}}]``).
  Followed: labelstud.io/tags/text, /tags/textarea, /tags/choices, /tags/choice, /guide/tasks.
- Argilla 2.x: `argilla_dataset`, the folder ``rg.Dataset.to_disk`` writes and
  ``rg.Dataset.from_disk`` reads (docs.argilla.io/latest/how_to_guides/import_export, and the SDK's
  ``argilla/datasets/_io/_disk.py``): ``.argilla/dataset.json`` (the dataset model),
  ``.argilla/settings.json`` (``Settings.serialize()``) and ``records.json`` (``Record.to_dict()``
  per record). Checked against argilla 2.8.0: ``Settings.from_json`` and ``Record.from_dict`` read
  these files back. Load it with::

      import argilla as rg
      client = rg.Argilla(api_url="...", api_key="...")
      dataset = rg.Dataset.from_disk("budgetlab-pool-7/", workspace="my_workspace", client=client)

- `template_csv` / `template_jsonl`: ``id, prompt, answer`` with the answer left empty.

Import (`parse_labels`) recognises, from the content rather than the file name:

- Label Studio JSON export (tasks with ``data`` and ``annotations``; guide/export "Label Studio JSON
  format of annotated tasks"); cancelled (skipped) annotations are left out.
- Label Studio JSON-MIN export (one flat object per annotation: the task data, ``answer``,
  ``annotator``, ``annotation_id``...; label-studio-converter ``convert_to_json_min``).
- Argilla 2.x records: the nested form of ``records.json`` / ``dataset.records.to_list()``
  (``responses: {"answer": [{"value", "user_id"}]}``; a ``status`` there is honoured when present,
  the SDK's nested export leaves it out) and the flat form of ``to_list(flatten=True)``
  (``answer.responses``, ``answer.responses.users``, ``answer.responses.status``). Only submitted
  responses count when a status is given.
- CSV with an ``id`` and an ``answer`` column (others ignored; an ``annotator`` column is read),
  JSONL or a JSON array of ``{"id": ..., "answer": ...}`` objects.

Every problem raises `LabelFileError` with a message that says what is wrong, where, and what to do.
"""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from backend.csv_cells import safe_row, unguard_cell
from backend.curation.grading import TASK_TYPES, parse_options

ID_KEY = "budgetlab_id"
POOL_KEY = "budgetlab_pool"
PROMPT_KEY = "prompt"
ANSWER_NAME = "answer"  # the control / question / column every format uses for the label
FALLBACK_CHOICE_LETTERS = tuple("ABCDE")

FORMAT_LABEL_STUDIO = "label_studio_json"
FORMAT_LABEL_STUDIO_MIN = "label_studio_json_min"
FORMAT_ARGILLA = "argilla"
FORMAT_CSV = "csv"
FORMAT_JSONL = "jsonl"
FORMAT_JSON_ROWS = "json"

ARGILLA_DATASET_PATH = ".argilla/dataset.json"
ARGILLA_SETTINGS_PATH = ".argilla/settings.json"
ARGILLA_RECORDS_PATH = "records.json"

_PLACEHOLDERS = {
    "numeric": "The final number only, e.g. 42",
    "math": "The final answer in LaTeX, e.g. \\frac{3}{4}",
    "exact": "The exact final answer text",
}
_GUIDELINES = {
    "numeric": "Read the problem and give its final answer as a number only (no units, no working).",
    "math": "Read the problem and give its final answer in LaTeX (e.g. \\frac{3}{4}, 2\\sqrt{5}), no working.",
    "choice": "Read the question and pick the letter of the correct option; the options are listed in the prompt.",
    "exact": "Read the question and give its exact final answer (e.g. Yes, False, a word list), no working.",
}
# Column/key names people use for the answer or the id in their own sheets: named in the error so
# the manager sees which column we think they meant.
_ANSWER_LIKE = {"label", "labels", "gold", "target", "response", "output", "value", "annotation", "result",
                "choice", "solution", "expected", "correct", "truth", "ground_truth", "reference"}
_ID_LIKE = {"external_id", "prompt_id", "question_id", "uid", "key", "idx", "index", "task_id", "record_id",
            "row_id", "example_id", "item_id"}
_ZIP_MAGIC = b"PK\x03\x04"


class LabelFileError(ValueError):
    """An uploaded labels file we cannot read; the message says what is wrong, where and what to do."""


@dataclass(frozen=True)
class LabelingRow:
    """One prompt to label: its pool-unique external id and the text the annotator sees."""

    external_id: str
    prompt: str


@dataclass(frozen=True)
class Annotation:
    """One annotator's answer to one prompt; `line` locates it in the file ("line 7", "task 3, annotation 2")."""

    external_id: str
    answer: str
    annotator: str | None
    line: str


@dataclass(frozen=True)
class ParsedLabels:
    format: str
    annotations: list[Annotation]


def _check_task_type(task_type: str) -> None:
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; use one of {', '.join(TASK_TYPES)}")


def choice_letters(prompts: Iterable[str]) -> list[str]:
    """The option letters found in the prompts ("(A) pink ball" lines), sorted; A-E when none has any."""
    letters: set[str] = set()
    for prompt in prompts:
        letters.update(parse_options(prompt))
    return sorted(letters) if letters else list(FALLBACK_CHOICE_LETTERS)


# --- exports -------------------------------------------------------------------------------------


def label_studio_config(task_type: str, prompts: Iterable[str]) -> str:
    """Label Studio labeling config: the prompt as ``<Text name="prompt" value="$prompt">`` and one
    required single answer named ``answer`` (a TextArea, or letter Choices for choice pools)."""
    _check_task_type(task_type)
    view = ET.Element("View")
    ET.SubElement(view, "Header", value="Prompt")
    ET.SubElement(view, "Text", name=PROMPT_KEY, value=f"${PROMPT_KEY}")
    if task_type == "choice":
        ET.SubElement(view, "Header", value="Pick the letter of the correct option")
        choices = ET.SubElement(view, "Choices", name=ANSWER_NAME, toName=PROMPT_KEY, choice="single",
                                required="true", showInline="true", requiredMessage="Pick one option")
        for letter in choice_letters(prompts):
            ET.SubElement(choices, "Choice", value=letter)
    else:
        ET.SubElement(view, "Header", value="Final answer")
        # maxSubmissions=1: one answer per annotation, so the export holds a single text per result.
        ET.SubElement(view, "TextArea", name=ANSWER_NAME, toName=PROMPT_KEY, rows="2", maxSubmissions="1",
                      editable="true", required="true", requiredMessage="Give the final answer",
                      placeholder=_PLACEHOLDERS[task_type])
    ET.indent(view)
    return ET.tostring(view, encoding="unicode") + "\n"


def label_studio_tasks(rows: Sequence[LabelingRow], pool_id: int | str) -> list[dict]:
    """Tasks in Label Studio's import format; the id and pool travel in ``data`` and come back in the export."""
    return [{"data": {ID_KEY: row.external_id, PROMPT_KEY: row.prompt, POOL_KEY: pool_id}} for row in rows]


def argilla_dataset(rows: Sequence[LabelingRow], task_type: str, pool_id: int | str) -> dict[str, bytes]:
    """The files of an ``rg.Dataset.to_disk`` folder (relative path -> content) for ``rg.Dataset.from_disk``."""
    _check_task_type(task_type)
    if task_type == "choice":
        letters = choice_letters(row.prompt for row in rows)
        question_settings: dict = {"type": "label_selection",
                                   "options": [{"text": letter, "value": letter} for letter in letters],
                                   # what the SDK's LabelQuestion fills in: all options shown, from 3 up
                                   "visible_options": len(letters) if len(letters) >= 3 else None}
    else:
        question_settings = {"type": "text", "use_markdown": False}
    unset = {"id": None, "inserted_at": None, "updated_at": None}  # the server assigns these on import
    settings = {
        "guidelines": _GUIDELINES[task_type],
        "questions": [{**unset, "name": ANSWER_NAME, "settings": question_settings, "title": "Answer",
                       "description": None, "required": True, "dataset_id": None,
                       "type": question_settings["type"]}],
        "fields": [{**unset, "name": PROMPT_KEY, "settings": {"type": "text", "use_markdown": False},
                    "title": "Prompt", "required": True, "description": None, "dataset_id": None, "type": "text"}],
        "vectors": [],
        "metadata": [{**unset, "name": ID_KEY,
                      "settings": {"visible_for_annotators": False, "type": "terms", "values": None},
                      "title": "Budgetlab id", "visible_for_annotators": False, "dataset_id": None}],
        "allow_extra_metadata": True,
        "distribution": {"strategy": "overlap", "min_submitted": 1},
        "mapping": None,
    }
    dataset = {**unset, "name": _argilla_dataset_name(pool_id), "status": "draft",
               "guidelines": settings["guidelines"], "allow_extra_metadata": True,
               "distribution": settings["distribution"], "workspace_id": None, "last_activity_at": None}
    records = [{"id": row.external_id, "fields": {PROMPT_KEY: row.prompt},
                "metadata": {ID_KEY: row.external_id, POOL_KEY: str(pool_id)},
                "suggestions": {}, "responses": {}, "vectors": {}, "status": "pending", "_server_id": None}
               for row in rows]
    return {
        ARGILLA_DATASET_PATH: _json_bytes(dataset),
        ARGILLA_SETTINGS_PATH: _json_bytes(settings),
        ARGILLA_RECORDS_PATH: _json_bytes(records),
    }


def _argilla_dataset_name(pool_id: int | str) -> str:
    # Argilla dataset names take letters, digits, "-" and "_".
    return "budgetlab-pool-" + re.sub(r"[^A-Za-z0-9_-]+", "-", str(pool_id)).strip("-")


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=1).encode("utf-8")


TEMPLATE_COLUMNS = ("id", "prompt", "answer")


def template_csv(rows: Sequence[LabelingRow]) -> bytes:
    """A sheet to fill in: ``id, prompt, answer`` with the answer column empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(TEMPLATE_COLUMNS)
    for row in rows:
        writer.writerow(safe_row((row.external_id, row.prompt, "")))
    return buffer.getvalue().encode("utf-8")


def template_jsonl(rows: Sequence[LabelingRow]) -> bytes:
    """One ``{"id", "prompt", "answer": ""}`` object per line."""
    lines = [json.dumps({"id": row.external_id, "prompt": row.prompt, "answer": ""}, ensure_ascii=False)
             for row in rows]
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


# --- import --------------------------------------------------------------------------------------

# The shapes one JSON object can have, with the words an error uses for them.
_LS_TASK, _LS_MIN, _ARGILLA, _ROW = "ls_task", "ls_min", "argilla", "row"
_SHAPE_NAMES = {_LS_TASK: "Label Studio tasks", _LS_MIN: "Label Studio JSON-MIN rows",
                _ARGILLA: "Argilla records", _ROW: "id/answer rows"}


def parse_labels(filename: str, content: bytes) -> ParsedLabels:
    """Read the annotations in an uploaded file, whatever supported format it is in (see module doc)."""
    try:
        return _parse_labels(filename, content)
    except (TypeError, AttributeError, KeyError, RecursionError, csv.Error) as error:
        # A shape the readers do not expect (a number where a list belongs, JSON nested thousands deep):
        # still the file's fault, said as such rather than as a server error.
        raise LabelFileError(f"{filename} has a structure this importer does not read ({type(error).__name__}: "
                             f"{str(error)[:200]}); upload the export as the labeling tool wrote it, or a CSV "
                             "with id and answer columns") from None


def _parse_labels(filename: str, content: bytes) -> ParsedLabels:
    text = _decode(filename, content)
    stripped = text.lstrip()
    if not stripped:
        raise LabelFileError(f"{filename} is empty; upload the file your annotators filled in or exported")
    looks_json = stripped[0] in "[{"
    if not looks_json:
        if filename.lower().endswith((".json", ".jsonl", ".ndjson")):
            raise LabelFileError(f"{filename} is named like a JSON file but does not hold JSON (it starts with "
                                 f"{stripped[:20]!r}); upload the JSON export itself, or save the sheet as CSV")
        parsed = _parse_csv(text)
    else:
        items, is_lines = _load_json_items(stripped)
        parsed = _parse_json_items(items, is_lines)
    if not parsed.annotations:
        raise LabelFileError(f"{filename} holds no annotations{_why_empty.get(parsed.format, '')}")
    return parsed


_why_empty = {
    FORMAT_LABEL_STUDIO: ": no task has a submitted (not cancelled) annotation; label the tasks in Label Studio, "
                         "then export the project again as JSON",
    FORMAT_LABEL_STUDIO_MIN: ": no row carries an annotation; label the tasks in Label Studio, then export again",
    FORMAT_ARGILLA: ": no record has a submitted response to the 'answer' question; submit the answers in "
                    "Argilla (drafts and discarded ones do not count), then export again",
    FORMAT_CSV: ": the header is there but no rows follow",
}


def _decode(filename: str, content: bytes) -> str:
    if content.startswith(_ZIP_MAGIC):
        raise LabelFileError(f"{filename} is a ZIP or Excel (.xlsx) file, not JSON or CSV; unzip it, or save "
                             "the sheet as 'CSV UTF-8' and upload that")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise LabelFileError(f"{filename} is not UTF-8 text (byte {error.start} cannot be read); export it as "
                             "JSON, or save the sheet as 'CSV UTF-8'") from None
    if "\x00" in text:
        raise LabelFileError(f"{filename} is a binary file, not JSON or CSV; export it as JSON or CSV")
    return text


def _load_json_items(text: str) -> tuple[list[tuple[str, object]], bool]:
    """(locator, value) for each item: the array's elements, the one object, or each JSONL line."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        if text[0] == "[" or "\n" not in text.strip():
            raise LabelFileError(f"the file is not valid JSON: {error.msg} at line {error.lineno}, column "
                                 f"{error.colno}; export it again or fix that place") from None
        return _load_json_lines(text), True
    if isinstance(document, list):
        return [(f"item {index}", item) for index, item in enumerate(document, start=1)], False
    return [("line 1", document)], True


def _load_json_lines(text: str) -> list[tuple[str, object]]:
    items: list[tuple[str, object]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as error:
            raise LabelFileError(f"line {number} is not valid JSON ({error.msg} at column {error.colno}); a JSONL "
                                 "file holds one complete JSON object per line") from None
    return items


def _shape(item: Mapping) -> str:
    if "data" in item and ("annotations" in item or "completions" in item):
        return _LS_TASK
    if "annotation_id" in item and "annotator" in item:
        return _LS_MIN
    if isinstance(item.get("responses"), Mapping) and ("fields" in item or "metadata" in item):
        return _ARGILLA
    if any(isinstance(key, str) and key.endswith(".responses") for key in item):
        return _ARGILLA
    return _ROW


def _parse_json_items(items: list[tuple[str, object]], is_lines: bool) -> ParsedLabels:
    objects: list[tuple[str, Mapping]] = []
    for where, item in items:
        if not isinstance(item, Mapping):
            raise LabelFileError(f"{where} is a JSON {_json_type(item)}, not an object; each "
                                 f"{'line' if is_lines else 'item'} must be an object such as "
                                 '{"id": "q1", "answer": "42"}')
        objects.append((where, item))
    if not objects:
        raise LabelFileError("the file holds an empty JSON list: no annotations to import")
    by_shape: dict[str, list[str]] = defaultdict(list)
    for where, item in objects:
        by_shape[_shape(item)].append(where)
    if len(by_shape) > 1:
        parts = [f"{_SHAPE_NAMES[shape]} ({_some(places)})" for shape, places in by_shape.items()]
        raise LabelFileError(f"the file mixes formats: {'; '.join(parts)}; upload one export or one filled-in "
                             "template at a time")
    shape = next(iter(by_shape))
    if shape == _LS_TASK:
        return ParsedLabels(FORMAT_LABEL_STUDIO, _label_studio_annotations(objects))
    if shape == _LS_MIN:
        return ParsedLabels(FORMAT_LABEL_STUDIO_MIN, _label_studio_min_annotations(objects))
    if shape == _ARGILLA:
        return ParsedLabels(FORMAT_ARGILLA, _argilla_annotations(objects))
    rows = [(where, {str(key): value for key, value in item.items()}) for where, item in objects]
    return ParsedLabels(FORMAT_JSONL if is_lines else FORMAT_JSON_ROWS, _row_annotations(rows, "key"))


def _json_type(value: object) -> str:
    return {list: "list", dict: "object", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), "null")


def _some(places: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(places[:limit])
    return shown + (f" and {len(places) - limit} more" if len(places) > limit else "")


# Label Studio ---------------------------------------------------------------------------------


def _label_studio_id(where: str, data: object) -> str:
    if not isinstance(data, Mapping) or data.get(ID_KEY) in (None, ""):
        keys = ", ".join(sorted(map(str, data))) if isinstance(data, Mapping) and data else "(none)"
        raise LabelFileError(f"{where}: the tasks' data has keys {keys} but no {ID_KEY}; export the Label Studio "
                             f"project created from Budgetlab's export, or add {ID_KEY} (the prompt id) to each "
                             "task's data")
    return str(data[ID_KEY])


def _annotator(completed_by: object) -> str | None:
    # Label Studio writes a user id, or a {"id", "email", ...} object in newer exports.
    if isinstance(completed_by, Mapping):
        completed_by = completed_by.get("email") or completed_by.get("id")
    return None if completed_by in (None, "", {}) else str(completed_by)


def _result_answer(where: str, results: object) -> str:
    """The answer in one annotation's ``result`` list: the ``answer`` control's text or choices."""
    if not isinstance(results, list):
        return ""
    values = [r.get("value") for r in results if isinstance(r, Mapping) and r.get("from_name") == ANSWER_NAME]
    if not values:  # a project built by hand with another control name: take its one text/choice result
        values = [r.get("value") for r in results if isinstance(r, Mapping)
                  and str(r.get("type", "")).lower() in ("textarea", "choices")]
        if len(values) > 1:
            names = sorted({str(r.get("from_name")) for r in results if isinstance(r, Mapping)})
            raise LabelFileError(f"{where} has several answers ({', '.join(names)}) and none named '{ANSWER_NAME}'; "
                                 f"use Budgetlab's labeling config, whose control is named '{ANSWER_NAME}'")
    parts: list[str] = []
    for value in values:
        if isinstance(value, Mapping):
            for key in ("text", "choices"):
                if isinstance(value.get(key), list):
                    parts.extend(str(part) for part in value[key])
    # Several texts only if the TextArea allowed several submissions; kept together for the caller to judge.
    return "\n".join(parts).strip()


def _label_studio_annotations(tasks: list[tuple[str, Mapping]]) -> list[Annotation]:
    annotations: list[Annotation] = []
    for index, (_, task) in enumerate(tasks, start=1):
        label = f"task {index}" + (f" (id {task['id']})" if task.get("id") is not None else "")
        external_id = _label_studio_id(label, task.get("data"))
        entries = task.get("annotations") if "annotations" in task else task.get("completions")
        for number, entry in enumerate(entries or [], start=1):
            if not isinstance(entry, Mapping) or entry.get("was_cancelled") or entry.get("skipped"):
                continue
            locator = f"{label}, annotation {number}"
            annotations.append(Annotation(external_id, _result_answer(locator, entry.get("result")),
                                          _annotator(entry.get("completed_by")), locator))
    return annotations


def _label_studio_min_annotations(rows: list[tuple[str, Mapping]]) -> list[Annotation]:
    annotations: list[Annotation] = []
    for where, row in rows:
        external_id = _label_studio_id(where, row)
        if row.get("annotation_id") is None and ANSWER_NAME not in row:
            continue  # a task nobody annotated
        annotations.append(Annotation(external_id, _min_answer(row.get(ANSWER_NAME)),
                                      _annotator(row.get("annotator")), where))
    return annotations


def _min_answer(value: object) -> str:
    # JSON-MIN flattens a single text or choice to a string; several stay as [{"text": [...]}, ...].
    if isinstance(value, list):
        return _result_answer("", [{"from_name": ANSWER_NAME, "value": part} for part in value])
    return _scalar_text(value) or ""


# Argilla --------------------------------------------------------------------------------------


def _argilla_annotations(records: list[tuple[str, Mapping]]) -> list[Annotation]:
    annotations: list[Annotation] = []
    for index, (_, record) in enumerate(records, start=1):
        label = f"record {index}"
        external_id = _argilla_id(label, record)
        for number, (value, user, status) in enumerate(_argilla_responses(label, record), start=1):
            if status is not None and status != "submitted":
                continue  # drafts and discarded responses are not answers
            if status is None and value is None:
                continue
            annotations.append(Annotation(external_id, _argilla_value(value), user, f"{label}, response {number}"))
    return annotations


def _argilla_id(where: str, record: Mapping) -> str:
    metadata = record.get("metadata")
    for source in (metadata if isinstance(metadata, Mapping) else {}, record):
        if source.get(ID_KEY) not in (None, ""):
            return str(source[ID_KEY])
    if record.get("id") not in (None, ""):
        return str(record["id"])
    raise LabelFileError(f"{where} has no {ID_KEY} metadata and no id; export the Argilla dataset created from "
                         f"Budgetlab's export, or add {ID_KEY} (the prompt id) to each record's metadata")


def _argilla_responses(where: str, record: Mapping) -> list[tuple[object, str | None, str | None]]:
    """(value, user id, status or None) for each response to the answer question, nested or flat."""
    nested = record.get("responses")
    if isinstance(nested, Mapping):
        question = _argilla_question(where, [str(name) for name in nested])
        entries = nested.get(question) if question else None
        return [(entry.get("value"), _annotator(entry.get("user_id")), entry.get("status"))
                for entry in entries or [] if isinstance(entry, Mapping)]
    names = [key[: -len(".responses")] for key in record if isinstance(key, str) and key.endswith(".responses")]
    question = _argilla_question(where, names)
    if question is None:
        return []
    values = record.get(f"{question}.responses") or []
    users = record.get(f"{question}.responses.users") or []
    statuses = record.get(f"{question}.responses.status") or []
    return [(value, _annotator(users[i]) if i < len(users) else None, statuses[i] if i < len(statuses) else None)
            for i, value in enumerate(values)]


def _argilla_question(where: str, names: list[str]) -> str | None:
    if ANSWER_NAME in names or not names:
        return ANSWER_NAME if names else None
    if len(names) == 1:
        return names[0]
    raise LabelFileError(f"{where} has responses to {', '.join(sorted(names))} but none named '{ANSWER_NAME}'; use "
                         f"the dataset created from Budgetlab's export, whose question is named '{ANSWER_NAME}'")


def _argilla_value(value: object) -> str:
    if isinstance(value, list):  # a multi-label question
        return ", ".join(str(part) for part in value)
    return _scalar_text(value) or ""


# CSV / JSONL rows -------------------------------------------------------------------------------


def _scalar_text(value: object) -> str | None:
    """A cell or JSON value as text (numbers as written, booleans as True/False); None if not a scalar."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (str, int, float)):
        return str(value).strip()
    return None


def _parse_csv(text: str) -> ParsedLabels:
    from backend.pools.ingest import MAX_LINE_BYTES

    if csv.field_size_limit() < MAX_LINE_BYTES:  # a long prompt in our own template must read back, as ingest does
        csv.field_size_limit(MAX_LINE_BYTES)
    header_line = next(line for line in text.splitlines() if line.strip())
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(header_line, delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    header: list[str] | None = None
    rows: list[tuple[str, dict[str, object]]] = []
    start = 1
    for cells in reader:
        # csv.reader counts physical lines, so a quoted cell spanning lines still gets its first line here
        where, start = f"line {start}", reader.line_num + 1
        if not any(cell.strip() for cell in cells):
            continue
        if header is None:
            header = [cell.strip().lower() for cell in cells]
            _check_columns(set(header), "column", "the first line (the header) has")
            continue
        rows.append((where, {key: unguard_cell(cell) for key, cell in zip(header, cells, strict=False)}))
    return ParsedLabels(FORMAT_CSV, _row_annotations(rows, "column"))


def _check_columns(keys: set[str], noun: str, found: str) -> None:
    listed = ", ".join(sorted(keys)) or "nothing"
    if "id" not in keys and ID_KEY not in keys:
        similar = sorted(k for k in keys if k in _ID_LIKE or k.endswith("_id"))
        hint = f" ({', '.join(similar)} looks like it; rename it)" if similar else ""
        raise LabelFileError(f"no 'id' {noun}: {found} {listed}{hint}. The {noun} must be named 'id' and hold the "
                             "prompt ids from Budgetlab's template")
    if ANSWER_NAME not in keys:
        similar = sorted(k for k in keys if k in _ANSWER_LIKE or ANSWER_NAME in k)
        hint = f" ({', '.join(similar)} looks like it; rename it)" if similar else ""
        raise LabelFileError(f"no 'answer' {noun}: {found} {listed}{hint}. The {noun} holding the labels must be "
                             "named 'answer'")


def _row_annotations(rows: list[tuple[str, dict[str, object]]], noun: str) -> list[Annotation]:
    if noun == "key":
        _check_columns({key.strip().lower() for _, row in rows for key in row}, "key", "the rows have keys")
        rows = [(where, {key.strip().lower(): value for key, value in row.items()}) for where, row in rows]
    id_key = ID_KEY if any(ID_KEY in row for _, row in rows) else "id"  # a Label Studio CSV export names it so
    annotations: list[Annotation] = []
    missing_id: list[str] = []
    places: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for where, row in rows:
        if "annotation_id" in row and row["annotation_id"] in ("", None):
            continue  # Label Studio's CSV export lists tasks nobody annotated with an empty annotation_id
        external_id = _scalar_text(row.get(id_key))
        if not external_id:
            missing_id.append(where)
            continue
        answer = _scalar_text(row.get(ANSWER_NAME))
        if answer is None:
            raise LabelFileError(f"{where}: the answer is a JSON {_json_type(row.get(ANSWER_NAME))}; give it as text "
                                 'or a number, e.g. "answer": "42"')
        annotator = _scalar_text(row.get("annotator")) or None
        places[(external_id, annotator)].append(where)
        annotations.append(Annotation(external_id, answer, annotator, where))
    if missing_id:
        raise LabelFileError(f"{_some(missing_id)} {'has' if len(missing_id) == 1 else 'have'} no id; every row "
                             f"needs the prompt id from Budgetlab's template in its '{id_key}' {noun}")
    duplicates = [(key, where) for key, where in places.items() if len(where) > 1]
    if duplicates:
        listed = "; ".join(f"{external_id}{f' by {annotator}' if annotator else ''} on {', '.join(where)}"
                           for (external_id, annotator), where in duplicates[:10])
        more = f" and {len(duplicates) - 10} more" if len(duplicates) > 10 else ""
        raise LabelFileError(f"prompt ids appear more than once: {listed}{more}. The file holds one answer per "
                             "prompt: keep one row each (or add an 'annotator' column for several annotators)")
    return annotations


__all__ = [
    "ANSWER_NAME", "ARGILLA_DATASET_PATH", "ARGILLA_RECORDS_PATH", "ARGILLA_SETTINGS_PATH", "Annotation",
    "FORMAT_ARGILLA", "FORMAT_CSV", "FORMAT_JSONL", "FORMAT_JSON_ROWS", "FORMAT_LABEL_STUDIO",
    "FORMAT_LABEL_STUDIO_MIN", "ID_KEY", "LabelFileError", "LabelingRow", "ParsedLabels", "TEMPLATE_COLUMNS",
    "argilla_dataset", "choice_letters", "label_studio_config", "label_studio_tasks", "parse_labels",
    "template_csv", "template_jsonl",
]
