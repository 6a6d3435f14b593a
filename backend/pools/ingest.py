"""Streaming readers for uploaded pool files: JSON Lines, CSV/TSV, Parquet and BIG-Bench style JSON.

Pure: no database. A `PoolFileReader` turns a binary file object plus a `FieldMapping` into batches
of rows ``(position, external_id, text, answer, locator)`` in constant memory:

- JSONL and CSV are read in 1 MiB blocks cut at line ends and decoded as UTF-8 block by block (a
  line break never falls inside a UTF-8 character), so a bad byte is reported with its line;
- Parquet is read with ``ParquetFile.iter_batches``, only the mapped columns;
- a ``.json`` document (BIG-Bench Hard's ``{"examples": [...]}``) is small by nature: it is parsed
  whole, but never beyond `MAX_JSON_DOCUMENT_BYTES`.

``locator`` is where the row sits in the file, 1-based, in the unit the user sees: the line of a
JSONL or CSV file (the line a CSV record starts on), the data row of a Parquet file, the example of a
JSON document. Every `IngestError` names the line (or row) and the field, and says what to do.

A `FieldMapping` with ``guess`` (the user named no field) is settled from the first record's fields
(or the header, or the schema) by common names: see `guess_mapping`.

Duplicate ids are found with a set of 64-bit hashes (about 70 bytes per row); a hash seen twice is
verified by re-reading the file up to that point, so a hash collision never rejects a good file.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import PurePath
from typing import IO, Any

from backend.errors import AppError

# format name -> what the user is told
FORMATS: dict[str, str] = {
    "jsonl": "JSON Lines (.jsonl, .ndjson): one JSON object per line",
    "csv": "CSV (.csv) with a header row",
    "tsv": "TSV (.tsv) with a header row",
    "parquet": "Parquet (.parquet)",
    "json": 'JSON (.json): a list of objects, or {"examples": [...]} as in BIG-Bench Hard',
}
EXTENSIONS: dict[str, str] = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".jsonlines": "jsonl",
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
    ".parquet": "parquet", ".pq": "parquet",
    ".json": "json",
}
_FORMAT_ALIASES = {"ndjson": "jsonl", "jsonlines": "jsonl", "tab": "tsv", "pq": "parquet"}
UNITS = {"jsonl": "line", "csv": "line", "tsv": "line", "parquet": "row", "json": "example"}

LABEL_FREE_HINT = ("name only the prompt field (prompt_field=..., no answer_field) to import the prompts without "
                   "answers (label-free)")
BATCH_ROWS = 5_000
READ_BLOCK_BYTES = 1 << 20
MAX_LINE_BYTES = 32 << 20
MAX_JSON_DOCUMENT_BYTES = 32 << 20
EXAMPLES_SHOWN = 5

# (position, external_id, text, answer, locator)
Row = tuple[int, str, str, "str | None", int]


class IngestError(AppError):
    """An uploaded file we will not import. 400: unreadable; 413: too large; 415: unknown format;
    422: readable but wrong for a pool (missing field, empty prompts, duplicate ids, bad answers)."""


@dataclass(frozen=True)
class FieldMapping:
    """Which fields hold the prompt, the gold answer and the id. ``guess``: none was named; the reader
    picks them from the file's own fields by common names (`guess_mapping`) once it has seen them."""

    prompt_field: str = "prompt"
    answer_field: str | None = None
    id_field: str | None = None
    guess: bool = False


# Common names, most specific first: MATH-500 has both "answer" and "solution", the answer is "answer".
GUESSED_NAMES: dict[str, tuple[str, ...]] = {
    "prompt": ("prompt", "question", "problem", "input", "query"),
    "answer": ("answer", "target", "solution", "gold", "label"),
    "id": ("id", "unique_id", "idx", "qid"),
}


def _find_field(fields: list[str], names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in fields:
            return name
    folded = {field.strip().casefold(): field for field in reversed(fields)}
    for name in names:
        if name in folded:
            return folded[name]
    return None


def guess_mapping(fields: Iterable[str]) -> FieldMapping | None:
    """The mapping a file's fields suggest: the prompt from prompt|question|problem|input|query, the
    answer from answer|target|solution|gold|label (none: label-free), the id from id|unique_id|idx|qid
    (none: rows are numbered). Names match exactly first, then ignoring case. None: no prompt field."""
    fields = [f for f in fields if isinstance(f, str)]
    prompt = _find_field(fields, GUESSED_NAMES["prompt"])
    if prompt is None:
        return None
    return FieldMapping(prompt_field=prompt, answer_field=_find_field(fields, GUESSED_NAMES["answer"]),
                        id_field=_find_field(fields, GUESSED_NAMES["id"]))


def supported_formats_text() -> str:
    return "; ".join(FORMATS.values())


def resolve_format(filename: str | None, explicit: str | None = None, fallback: str | None = None) -> str:
    """The format to read: the explicit one, else the file name's extension, else `fallback`; 415 otherwise."""
    if explicit:
        name = explicit.strip().lower().lstrip(".")
        name = _FORMAT_ALIASES.get(name, name)
        if name not in FORMATS:
            raise IngestError(415, f"Unknown format {explicit!r}. Supported formats: {supported_formats_text()}. "
                                   f"Send format= one of {', '.join(FORMATS)}.")
        return name
    suffix = PurePath(filename or "").suffix.lower()
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    if fallback:
        return fallback
    shown = f"'{filename}'" if filename else "the upload (it has no file name)"
    raise IngestError(415, f"Cannot tell the format of {shown} from its extension. Supported formats: "
                           f"{supported_formats_text()}. Rename the file with one of these extensions, or send "
                           f"format= one of {', '.join(FORMATS)}.")


# 64-bit hash used for duplicate detection (a module attribute, so tests can force collisions).
_id_hash: Callable[[str], int] = hash


def _describe_json(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"the value {value!r}"


def _decode_utf8(raw: bytes, lines_before: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = lines_before + raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise IngestError(
            400,
            f"Line {line} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at byte {column} of that line cannot be "
            f"decoded. Save the file as UTF-8 (in Excel: 'CSV UTF-8'; with pandas: encoding='utf-8') and upload "
            f"it again.",
        ) from None


def _line_blocks(fileobj: IO[bytes]) -> Iterator[tuple[int, list[str]]]:
    """(number of lines before the block, the block's lines without their '\\n'), reading 1 MiB at a time."""
    lines_before = 0
    tail = b""
    first = True
    while True:
        block = fileobj.read(READ_BLOCK_BYTES)
        if not block:
            break
        data = tail + block if tail else block
        cut = data.rfind(b"\n")
        if cut < 0:
            tail = data
            if len(tail) > MAX_LINE_BYTES:
                raise IngestError(400, f"Line {lines_before + 1} is longer than {MAX_LINE_BYTES >> 20} MiB "
                                       f"without a line break: is this really a line-based file? Split the "
                                       f"record or choose the right format.")
            continue
        text = _decode_utf8(data[:cut], lines_before)
        tail = data[cut + 1:]
        if first:
            text = text.removeprefix("\ufeff")
            first = False
        lines = text.split("\n")
        yield lines_before, lines
        lines_before += len(lines)
    if tail:
        text = _decode_utf8(tail, lines_before)
        if first:
            text = text.removeprefix("\ufeff")
        yield lines_before, [text]


class PoolFileReader:
    """Reads one uploaded file. Iterate `batches()` once; then `problems()` lists what was wrong with
    the content as a whole (empty prompts). Structural errors raise `IngestError` at once."""

    def __init__(self, fileobj: IO[bytes], fmt: str, mapping: FieldMapping, *, batch_rows: int = BATCH_ROWS,
                 reopen: Callable[[], IO[bytes]] | None = None, max_prompt_chars: int | None = None,
                 truncate_long: bool = False):
        """`fileobj` is read once, front to back (`read(n)` may return fewer bytes). Verifying a
        suspected duplicate id re-reads the file from its start: through `reopen()` (a new file object
        holding at least the bytes read so far) when given, else by seeking `fileobj`.
        A prompt longer than `max_prompt_chars` is cut to it when `truncate_long`, else it is a problem."""
        if fmt not in FORMATS:
            raise IngestError(415, f"Unknown format {fmt!r}. Supported formats: {supported_formats_text()}.")
        if not mapping.prompt_field:
            raise IngestError(422, "The prompt field is required: send prompt_field=<the field holding the prompt>.")
        self.fileobj = fileobj
        self.reopen = reopen
        self.fmt = fmt
        self.mapping = mapping
        self.batch_rows = batch_rows
        self.unit = UNITS[fmt]
        self.fields: list[str] | None = None  # the fields of the first record (or the header / schema)
        self.row_count = 0
        self.empty_prompt_count = 0
        self.empty_prompt_locators: list[int] = []
        self.max_prompt_chars = max_prompt_chars
        self.truncate_long = truncate_long
        self.long_prompt_count = 0  # refused, or cut when truncate_long
        self.long_prompt_locators: list[int] = []

    # --- public -------------------------------------------------------------------------------------

    def batches(self) -> Iterator[list[Row]]:
        records = self._records(self.fileobj)
        first = next(records, None)  # reads the header or first record, which settles a guessed mapping
        records = chain((first,), records) if first is not None else records
        mapping = self.mapping
        id_field = mapping.id_field
        seen: set[int] = set()
        id_hash = _id_hash
        unit = self.unit
        position = 0
        batch: list[Row] = []
        for locator, raw_id, raw_text, raw_answer in records:
            text = raw_text if type(raw_text) is str else self._coerce_text(raw_text, mapping.prompt_field, locator)
            if not text or text.isspace():
                self.empty_prompt_count += 1
                if len(self.empty_prompt_locators) < EXAMPLES_SHOWN:
                    self.empty_prompt_locators.append(locator)
                continue
            if "\x00" in text:
                raise self._nul_error(mapping.prompt_field, locator)
            if self.max_prompt_chars is not None and len(text) > self.max_prompt_chars:
                self.long_prompt_count += 1
                if len(self.long_prompt_locators) < EXAMPLES_SHOWN:
                    self.long_prompt_locators.append(locator)
                if not self.truncate_long:
                    continue
                text = text[:self.max_prompt_chars]
            if raw_answer is None:
                answer = None
            else:
                answer = raw_answer if type(raw_answer) is str else self._coerce_answer(raw_answer, locator)
                if not answer or answer.isspace():
                    answer = None
                elif "\x00" in answer:
                    raise self._nul_error(mapping.answer_field, locator)
            if id_field is None:
                external_id = str(position)
            else:
                if type(raw_id) is str and raw_id and not raw_id.isspace() and "\x00" not in raw_id:
                    external_id = raw_id  # the common case, without a call
                else:
                    external_id = self._coerce_id(raw_id, locator)
                key = id_hash(external_id)
                if key in seen:
                    first = self._find_first(external_id, locator)
                    if first is not None:
                        raise IngestError(
                            422,
                            f"Duplicate id {external_id!r} in field {id_field!r}: {unit} {first} and {unit} "
                            f"{locator} both use it. Ids must be unique within a pool: fix one of them, or leave "
                            f"id_field empty to number the rows instead.",
                        )
                else:
                    seen.add(key)
            batch.append((position, external_id, text, answer, locator))
            position += 1
            if len(batch) >= self.batch_rows:
                self.row_count = position
                yield batch
                batch = []
        self.row_count = position
        if batch:
            yield batch
        if position == 0 and self.empty_prompt_count == 0:
            raise self._empty_error()

    def problems(self) -> list[str]:
        """What is wrong with the file as a whole, found while reading (call after `batches()`)."""
        problems = []
        if self.empty_prompt_count:
            count = self.empty_prompt_count
            problems.append(
                f"{count} empty prompt{'s' if count != 1 else ''} in field {self.mapping.prompt_field!r} "
                f"({self._places(count, self.empty_prompt_locators)}): write the prompt there or remove "
                f"{'that ' + self.unit if count == 1 else 'those ' + self.unit + 's'}."
            )
        if self.long_prompt_count and not self.truncate_long:
            count = self.long_prompt_count
            problems.append(
                f"{count} prompt{'s are' if count != 1 else ' is'} longer than {self.max_prompt_chars:,} characters, "
                f"more than the model's context holds ({self._places(count, self.long_prompt_locators)}): "
                f"shorten {'them' if count != 1 else 'it'}, or upload with long_prompts=truncate to cut "
                f"{'them' if count != 1 else 'it'} to that length (BUDGETLAB_MAX_PROMPT_CHARS sets the limit)."
            )
        return problems

    def _places(self, count: int, locators: list[int]) -> str:
        """'lines 2, 4 and more': the first places of `count` found."""
        more = " and more" if count > len(locators) else ""
        return f"{self.unit}{'s' if len(locators) != 1 else ''} {', '.join(str(loc) for loc in locators)}{more}"

    # --- records per format: (locator, raw id, raw prompt, raw answer) ---------------------------------

    def _records(self, fileobj: IO[bytes]) -> Iterator[tuple[int, Any, Any, Any]]:
        if self.fmt == "jsonl":
            return self._jsonl_records(fileobj)
        if self.fmt in ("csv", "tsv"):
            return self._csv_records(fileobj, "," if self.fmt == "csv" else "\t")
        if self.fmt == "parquet":
            return self._parquet_records(fileobj)
        return self._json_document_records(fileobj)

    def _jsonl_records(self, fileobj: IO[bytes]) -> Iterator[tuple[int, Any, Any, Any]]:
        scan = json.JSONDecoder().scan_once
        mapping = self.mapping
        prompt_field, answer_field, id_field = mapping.prompt_field, mapping.answer_field, mapping.id_field
        checked = False
        for lines_before, lines in _line_blocks(fileobj):
            line_no = lines_before
            for line in lines:
                line_no += 1
                if not line or line.isspace():
                    continue
                try:
                    obj, end = scan(line, 0)
                    if end != len(line) and not line[end:].isspace():
                        raise ValueError
                except (StopIteration, ValueError, RecursionError):
                    obj = self._parse_json_line(line, line_no)
                if type(obj) is not dict:
                    raise IngestError(400, f"Line {line_no} is {_describe_json(obj)}, not a JSON object. Each line "
                                           f"of a JSONL file must be one object such as "
                                           f'{{"{prompt_field}": "..."}}; fix or remove that line.')
                if not checked:
                    self.fields = list(obj)
                    self._check_fields(self.fields, line_no)
                    checked = True
                    mapping = self.mapping
                    prompt_field, answer_field, id_field = mapping.prompt_field, mapping.answer_field, mapping.id_field
                try:
                    text = obj[prompt_field]
                except KeyError:
                    raise self._missing_field_error(prompt_field, "prompt", line_no, list(obj)) from None
                if id_field is not None:
                    try:
                        raw_id = obj[id_field]
                    except KeyError:
                        raise self._missing_field_error(id_field, "id", line_no, list(obj)) from None
                else:
                    raw_id = None
                yield line_no, raw_id, text, (obj.get(answer_field) if answer_field is not None else None)
        if not checked:
            raise self._empty_error()

    @staticmethod
    def _parse_json_line(line: str, line_no: int) -> Any:
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"{exc.msg} at character {exc.colno}"
        except RecursionError:
            problem = "it is nested too deeply"
        raise IngestError(400, f"Line {line_no} is not valid JSON ({problem}). Each line of a JSONL file must be "
                               f"one complete JSON object; fix or remove line {line_no} and upload again.")

    def _csv_records(self, fileobj: IO[bytes], delimiter: str) -> Iterator[tuple[int, Any, Any, Any]]:
        name = "CSV" if delimiter == "," else "TSV"
        if csv.field_size_limit() < MAX_LINE_BYTES:
            csv.field_size_limit(MAX_LINE_BYTES)

        def physical_lines() -> Iterator[str]:
            for _, lines in _line_blocks(fileobj):
                for line in lines:
                    yield line + "\n"

        reader = csv.reader(physical_lines(), delimiter=delimiter, strict=True)
        start = 1
        try:
            header: list[str] | None = None
            for record in reader:
                if header is None:
                    if not record or all(not cell.strip() for cell in record):
                        start = reader.line_num + 1
                        continue
                    header = [cell.strip() for cell in record]
                    self.fields = header
                    self._check_fields(header, start)
                    n_fields = len(header)
                    prompt_index = header.index(self.mapping.prompt_field)
                    answer_index = header.index(self.mapping.answer_field) if self.mapping.answer_field else None
                    id_index = header.index(self.mapping.id_field) if self.mapping.id_field else None
                    start = reader.line_num + 1
                    continue
                locator = start
                start = reader.line_num + 1
                if len(record) != n_fields:
                    if not record or (len(record) == 1 and not record[0].strip()):
                        continue  # a blank line
                    raise IngestError(
                        400,
                        f"{name} line {locator} has {len(record)} field(s) but the header has {n_fields}. This is "
                        f"usually broken quoting: a field containing the delimiter, a quote or a line break must "
                        f"be wrapped in double quotes, with quotes inside it doubled (\"\"). Fix line {locator} "
                        f"and upload again.",
                    )
                yield (locator, record[id_index] if id_index is not None else None, record[prompt_index],
                       record[answer_index] if answer_index is not None else None)
        except csv.Error as exc:
            if "end of data" in str(exc):
                detail = f"a quoted field opened on line {start} is never closed"
            else:
                detail = f"{exc} on line {reader.line_num}"
            raise IngestError(
                400,
                f"{name} record starting on line {start} is malformed: {detail}. A field containing the delimiter, "
                f"a quote or a line break must be wrapped in double quotes, with quotes inside it doubled (\"\"). "
                f"Fix the quoting and upload again.",
            ) from None
        if header is None:
            raise self._empty_error()

    def _parquet_records(self, fileobj: IO[bytes]) -> Iterator[tuple[int, Any, Any, Any]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(fileobj, buffer_size=1 << 20, pre_buffer=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise IngestError(400, f"The file is not a readable Parquet file ({exc}). Upload a Parquet file, or "
                                   f"name the format with format= one of {', '.join(FORMATS)}.") from None
        schema = parquet.schema_arrow
        self.fields = list(schema.names)
        self._check_fields(self.fields, None)
        mapping = self.mapping
        columns = [c for c in (mapping.prompt_field, mapping.answer_field, mapping.id_field) if c]
        for column in dict.fromkeys(columns):
            kind = schema.field(column).type
            if pa.types.is_nested(kind) or pa.types.is_dictionary(kind) and pa.types.is_nested(kind.value_type):
                raise IngestError(422, f"Parquet column {column!r} holds {kind}, not text or numbers. Map a text "
                                       f"column, or flatten this one before uploading.")
        row = 0
        batches = parquet.iter_batches(batch_size=self.batch_rows, columns=list(dict.fromkeys(columns)))
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except (pa.ArrowException, OSError) as exc:
                raise IngestError(400, f"Parquet rows after row {row} cannot be read ({exc}). The file looks "
                                       f"damaged: export it again and upload.") from None
            texts = batch.column(mapping.prompt_field).to_pylist()
            answers = batch.column(mapping.answer_field).to_pylist() if mapping.answer_field else None
            ids = batch.column(mapping.id_field).to_pylist() if mapping.id_field else None
            for i, text in enumerate(texts):
                row += 1
                yield (row, ids[i] if ids is not None else None, text,
                       answers[i] if answers is not None else None)
        if parquet.metadata.num_rows == 0:
            raise self._empty_error()

    def _json_document_records(self, fileobj: IO[bytes]) -> Iterator[tuple[int, Any, Any, Any]]:
        parts, size = [], 0
        while size <= MAX_JSON_DOCUMENT_BYTES:
            part = fileobj.read(MAX_JSON_DOCUMENT_BYTES + 1 - size)
            if not part:
                break
            parts.append(part)
            size += len(part)
        raw = b"".join(parts)
        del parts
        if len(raw) > MAX_JSON_DOCUMENT_BYTES:
            raise IngestError(413, f"A .json document is read whole, so it may be at most "
                                   f"{MAX_JSON_DOCUMENT_BYTES >> 20} MiB. Convert it to JSON Lines (one object per "
                                   f"line, .jsonl), which is streamed and may be much larger.")
        if not raw.strip():
            raise self._empty_error()
        text = _decode_utf8(raw, 0).removeprefix("\ufeff")
        del raw
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise IngestError(400, f"The JSON document is not valid JSON: {exc.msg} at line {exc.lineno}, "
                                   f"character {exc.colno}. Fix it there and upload again.") from None
        except RecursionError:
            raise IngestError(400, "The JSON document is nested too deeply to read.") from None
        del text
        if isinstance(document, dict):
            examples = document.get("examples")
            if not isinstance(examples, list):
                keys = ", ".join(repr(k) for k in list(document)[:30])
                raise IngestError(422, f'The JSON document is an object without an "examples" list (its keys: '
                                       f'{keys}). Upload a list of objects, {{"examples": [...]}} as in '
                                       f"BIG-Bench Hard, or one object per line as JSONL.")
        elif isinstance(document, list):
            examples = document
        else:
            raise IngestError(422, f"The JSON document is {_describe_json(document)}; upload a list of objects or "
                                   f'{{"examples": [...]}} as in BIG-Bench Hard.')
        del document
        mapping = self.mapping
        prompt_field, answer_field, id_field = mapping.prompt_field, mapping.answer_field, mapping.id_field
        for index, obj in enumerate(examples, start=1):
            if not isinstance(obj, dict):
                raise IngestError(422, f"Example {index} is {_describe_json(obj)}, not an object with a "
                                       f"{prompt_field!r} field. Every example must be an object.")
            if index == 1:
                self.fields = list(obj)
                self._check_fields(self.fields, 1)
                mapping = self.mapping
                prompt_field, answer_field, id_field = mapping.prompt_field, mapping.answer_field, mapping.id_field
            if prompt_field not in obj:
                raise self._missing_field_error(prompt_field, "prompt", index, list(obj))
            if id_field is not None and id_field not in obj:
                raise self._missing_field_error(id_field, "id", index, list(obj))
            yield (index, obj.get(id_field) if id_field is not None else None, obj[prompt_field],
                   obj.get(answer_field) if answer_field is not None else None)
        if not examples:
            raise self._empty_error()

    # --- checks and messages ----------------------------------------------------------------------------

    def _check_fields(self, fields: list[str], locator: int | None) -> None:
        """The first record (or header, or schema) must have every mapped field. A guessed mapping is
        settled here, from these fields."""
        if self.mapping.guess:
            guessed = guess_mapping(fields)
            if guessed is None:
                raise self._missing_field_error(None, "prompt", locator, fields)
            self.mapping = guessed
        for field, role in ((self.mapping.prompt_field, "prompt"), (self.mapping.answer_field, "answer"),
                            (self.mapping.id_field, "id")):
            if field is not None and field not in fields:
                raise self._missing_field_error(field, role, locator, fields)

    def _missing_field_error(self, field: str | None, role: str, locator: int | None,
                             fields: Iterable[str]) -> IngestError:
        """`field` None: none was named and none of the common names (GUESSED_NAMES) is there."""
        from backend.pools.presets import suggest_preset

        fields = list(fields)
        where = f"{self.unit.capitalize()} {locator} has" if locator is not None and self.unit != "row" else \
            "The file has"
        if self.fmt in ("csv", "tsv"):
            where = "The header has"
        shown = ", ".join(repr(f) for f in fields[:40]) + (" ..." if len(fields) > 40 else "") or "(none)"
        hint = f"Send {role}_field=<one of these fields>"
        if role == "answer":
            hint += f", or {LABEL_FREE_HINT}"
        if role == "id":
            hint += ", or leave id_field empty to number the rows"
        preset = suggest_preset(fields)
        if preset:
            hint += f". These fields look like {preset}: try preset={preset}"
        missing = repr(field) if field is not None else f"named {' or '.join(GUESSED_NAMES[role])}"
        return IngestError(422, f"{where} no field {missing} for the {role}. The fields that exist are: {shown}. "
                                f"{hint}.", details={"field": field, "fields": fields, "locator": locator})

    def _empty_error(self) -> IngestError:
        if self.fmt in ("csv", "tsv") and self.fields:
            return IngestError(400, "The file has a header but no rows. Upload a file with at least one prompt.")
        return IngestError(400, "The file is empty: it has no rows. Upload a file with at least one prompt "
                                f"(format: {FORMATS[self.fmt]}).")

    def _nul_error(self, field: str | None, locator: int) -> IngestError:
        return IngestError(422, f"{self.unit.capitalize()} {locator}, field {field!r} contains a NUL character "
                                f"(\\u0000), which cannot be stored. Remove it and upload again.")

    def _coerce_text(self, value: Any, field: str, locator: int) -> str:
        if value is None:
            return ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, bytes):
            return self._decode_cell(value, field, locator)
        raise IngestError(422, f"{self.unit.capitalize()} {locator}, field {field!r} is {_describe_json(value)}; "
                               f"the prompt must be text. Map another field with prompt_field=.")

    def _coerce_answer(self, value: Any, locator: int) -> str:
        field = self.mapping.answer_field
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return str(int(value)) if value.is_integer() else repr(value)
        if isinstance(value, bytes):
            return self._decode_cell(value, field, locator)
        if isinstance(value, str):
            return value
        raise IngestError(422, f"{self.unit.capitalize()} {locator}, field {field!r} is {_describe_json(value)}; "
                               f"an answer must be text or a number. Fix it, or {LABEL_FREE_HINT}.")

    def _coerce_id(self, value: Any, locator: int) -> str:
        field = self.mapping.id_field
        if type(value) is str:
            result = value
        elif isinstance(value, bool) or value is None:
            result = ""
        elif isinstance(value, int):
            result = str(value)
        elif isinstance(value, float):
            result = str(int(value)) if value.is_integer() else repr(value)
        elif isinstance(value, bytes):
            result = self._decode_cell(value, field, locator)
        else:
            raise IngestError(422, f"{self.unit.capitalize()} {locator}, field {field!r} is "
                                   f"{_describe_json(value)}; an id must be text or a number.")
        if not result.strip():
            raise IngestError(422, f"{self.unit.capitalize()} {locator} has an empty id in field {field!r}. Give "
                                   f"every row an id, or leave id_field empty to number the rows.")
        if "\x00" in result:
            raise self._nul_error(field, locator)
        return result

    def _decode_cell(self, value: bytes, field: str | None, locator: int) -> str:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise IngestError(400, f"{self.unit.capitalize()} {locator}, field {field!r} is not UTF-8 text. "
                                   f"Store the column as UTF-8 strings and upload again.") from None

    def _find_first(self, external_id: str, before: int) -> int | None:
        """Where `external_id` first occurs before `before`, re-reading the file from its start (only when
        two ids share a hash, which for distinct ids is a 1-in-10^19 event)."""
        saved_fields = self.fields
        if self.reopen is not None:
            fileobj, saved = self.reopen(), None
        else:
            fileobj, saved = self.fileobj, self.fileobj.tell()
            fileobj.seek(0)
        try:
            for locator, raw_id, _text, _answer in self._records(fileobj):
                if locator >= before:
                    return None
                if raw_id is not None and self._coerce_id(raw_id, locator) == external_id:
                    return locator
            return None
        finally:
            if saved is None:
                fileobj.close()
            else:
                fileobj.seek(saved)
            self.fields = saved_fields
