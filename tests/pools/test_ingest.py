"""The streaming readers on their own (no database)."""

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backend.pools import ingest
from backend.pools.ingest import FieldMapping, IngestError, PoolFileReader, guess_mapping, resolve_format


def read_all(content: bytes, fmt: str, mapping: FieldMapping, **kwargs) -> list:
    reader = PoolFileReader(io.BytesIO(content), fmt, mapping, **kwargs)
    return [row for batch in reader.batches() for row in batch]


def test_rows_are_positioned_and_located():
    content = b'\xef\xbb\xbf{"prompt": "a", "answer": "1"}\n\n{"prompt": "b"}\n{"prompt": "c", "answer": " "}'
    rows = read_all(content, "jsonl", FieldMapping(answer_field="answer"))
    assert rows == [(0, "0", "a", "1", 1), (1, "1", "b", None, 3), (2, "2", "c", None, 4)]


def test_batches_are_bounded():
    content = "".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(2500)).encode()
    reader = PoolFileReader(io.BytesIO(content), "jsonl", FieldMapping(), batch_rows=1000)
    assert [len(b) for b in reader.batches()] == [1000, 1000, 500]


def test_lines_longer_than_a_read_block(monkeypatch):
    monkeypatch.setattr(ingest, "READ_BLOCK_BYTES", 7)
    content = "".join(json.dumps({"prompt": "é" * n}) + "\n" for n in (1, 30, 2)).encode()
    rows = read_all(content, "jsonl", FieldMapping())
    assert [r[2] for r in rows] == ["é", "é" * 30, "éé"] and [r[4] for r in rows] == [1, 2, 3]


def test_line_too_long(monkeypatch):
    monkeypatch.setattr(ingest, "READ_BLOCK_BYTES", 8)
    monkeypatch.setattr(ingest, "MAX_LINE_BYTES", 64)
    with pytest.raises(IngestError) as error:
        read_all(b'{"prompt": "a"}\n{"prompt": "' + b"x" * 100 + b'"}\n', "jsonl", FieldMapping())
    assert error.value.status_code == 400 and "Line 2 is longer" in error.value.message


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet", "json"])
def test_hash_collisions_are_verified_not_trusted(monkeypatch, fmt):
    """Every id hashes alike: distinct ids still import; a real duplicate is still found and located."""
    monkeypatch.setattr(ingest, "_id_hash", lambda _id: 42)
    ids = ["a", "b", "c", "d"]

    def build(values):
        records = [{"id": v, "prompt": f"p{i}"} for i, v in enumerate(values)]
        if fmt == "jsonl":
            return "".join(json.dumps(r) + "\n" for r in records).encode()
        if fmt == "json":
            return json.dumps({"examples": records}).encode()
        if fmt == "csv":
            return ("id,prompt\n" + "".join(f"{r['id']},{r['prompt']}\n" for r in records)).encode()
        buffer = io.BytesIO()
        pq.write_table(pa.table({"id": values, "prompt": [r["prompt"] for r in records]}), buffer, row_group_size=2)
        return buffer.getvalue()

    rows = read_all(build(ids), fmt, FieldMapping(id_field="id"), batch_rows=2)
    assert [r[1] for r in rows] == ids
    with pytest.raises(IngestError) as error:
        read_all(build(ids + ["b"]), fmt, FieldMapping(id_field="id"), batch_rows=2)
    unit = ingest.UNITS[fmt]
    first, second = (3, 6) if fmt == "csv" else (2, 5)
    assert f"{unit} {first} and {unit} {second}" in error.value.message


def test_csv_records_spanning_lines_report_their_first_line():
    content = b'prompt,answer\n"multi\nline",1\n"x",2\n"bad"quote,3\n'
    with pytest.raises(IngestError) as error:
        read_all(content, "csv", FieldMapping(answer_field="answer"))
    assert "line 5" in error.value.message
    rows = read_all(content[: content.index(b'"bad"')], "csv", FieldMapping(answer_field="answer"))
    assert [(r[2], r[4]) for r in rows] == [("multi\nline", 2), ("x", 4)]


def test_resolve_format():
    assert resolve_format("a.JSONL") == "jsonl"
    assert resolve_format("a.ndjson") == "jsonl"
    assert resolve_format("a.bin", "Parquet") == "parquet"
    assert resolve_format("noext", None, "json") == "json"
    with pytest.raises(IngestError) as error:
        resolve_format("a.xlsx")
    assert error.value.status_code == 415


def test_json_document_size_cap(monkeypatch):
    monkeypatch.setattr(ingest, "MAX_JSON_DOCUMENT_BYTES", 10)
    with pytest.raises(IngestError) as error:
        read_all(json.dumps([{"prompt": "abcdefgh"}]).encode(), "json", FieldMapping())
    assert error.value.status_code == 413 and "JSON Lines" in error.value.message


def test_json_document_errors():
    with pytest.raises(IngestError) as error:
        read_all(b'{"examples": [\n{"input": "a"},\n{"input": }\n]}', "json", FieldMapping(prompt_field="input"))
    assert "line 3" in error.value.message
    with pytest.raises(IngestError) as error:
        read_all(b'{"canary": "x"}', "json", FieldMapping())
    assert "'canary'" in error.value.message and error.value.status_code == 422


def test_guess_mapping_prefers_the_most_specific_names():
    assert guess_mapping(["unique_id", "problem", "solution", "answer"]) == \
        FieldMapping(prompt_field="problem", answer_field="answer", id_field="unique_id")
    assert guess_mapping(["Input", "Target"]) == FieldMapping(prompt_field="Input", answer_field="Target")
    assert guess_mapping(["question"]) == FieldMapping(prompt_field="question")
    assert guess_mapping(["text", "result"]) is None


def test_a_guessed_mapping_is_settled_by_the_first_record():
    content = json.dumps({"examples": [{"input": "a", "target": "(A)"}, {"input": "b", "target": "(B)"}]}).encode()
    reader = PoolFileReader(io.BytesIO(content), "json", FieldMapping(guess=True))
    rows = [row for batch in reader.batches() for row in batch]
    assert reader.mapping == FieldMapping(prompt_field="input", answer_field="target")
    assert [(r[2], r[3]) for r in rows] == [("a", "(A)"), ("b", "(B)")]
