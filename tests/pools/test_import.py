"""Happy paths: presets on the real dataset files, CSV/TSV/Parquet/JSON, detection and overrides."""

import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import DATASETS
from tests.pools.conftest import upload


def all_prompts(client, pool_id: int, **params) -> list[dict]:
    items, offset = [], 0
    while True:
        page = client.get(f"/api/pools/{pool_id}/prompts", params={"limit": 1000, "offset": offset, **params})
        assert page.status_code == 200, page.text
        batch = page.json()["items"]
        items.extend(batch)
        if len(batch) < 1000:
            return items
        offset += 1000


def line_count(path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def test_preset_gsm8k(client):
    path = DATASETS / "gsm8k" / "test.jsonl"
    rows = line_count(path)
    assert rows >= 30
    response = upload(client, path.name, path.read_bytes(), preset="gsm8k", name="GSM8K test")
    assert response.status_code == 201, response.text
    pool = response.json()
    assert pool["name"] == "GSM8K test"
    assert (pool["prompt_count"], pool["task_type"], pool["has_answers"]) == (rows, "numeric", True)
    assert (pool["source_filename"], pool["source_format"]) == ("test.jsonl", "jsonl")
    prompts = all_prompts(client, pool["id"])
    assert len(prompts) == rows
    first = prompts[0]
    assert first["text"].startswith("Janet’s ducks lay 16 eggs per day.")
    assert first["answer"].endswith("#### 18") and first["gold"] == "18"
    assert [p["external_id"] for p in prompts[:3]] == ["0", "1", "2"]
    assert all(p["gold"] is not None for p in prompts)
    assert first["pass_rate"] is None and first["difficulty"] is None


def test_preset_bbh(client):
    path = DATASETS / "bbh" / "tracking_shuffled_objects_three_objects.json"
    response = upload(client, path.name, path.read_bytes(), preset="bbh")
    assert response.status_code == 201, response.text
    pool = response.json()
    examples = json.loads(path.read_text())["examples"]
    assert (pool["prompt_count"], pool["task_type"], pool["source_format"]) == (len(examples), "choice", "json")
    assert pool["name"] == path.name
    prompts = all_prompts(client, pool["id"])
    assert {p["gold"] for p in prompts} == {"A", "B", "C"}
    assert prompts[0]["answer"] == "(B)" and "Options:" in prompts[0]["text"]


def test_preset_math500(client):
    path = DATASETS / "math" / "test.jsonl"
    response = upload(client, path.name, path.read_bytes(), preset="math500")
    assert response.status_code == 201, response.text
    pool = response.json()
    assert (pool["prompt_count"], pool["task_type"]) == (line_count(path), "math")
    prompts = all_prompts(client, pool["id"])
    first_line = json.loads(path.read_text().splitlines()[0])
    assert prompts[0]["external_id"] == first_line["unique_id"]
    assert prompts[0]["answer"] == first_line["answer"] and prompts[0]["gold"]


def test_task_type_detected_without_preset(client):
    gsm8k = DATASETS / "gsm8k" / "test.jsonl"
    response = upload(client, "gsm.jsonl", gsm8k.read_bytes(), prompt_field="question", answer_field="answer")
    assert response.status_code == 201 and response.json()["task_type"] == "numeric"
    bbh = DATASETS / "bbh" / "tracking_shuffled_objects_three_objects.json"
    response = upload(client, "bbh.json", bbh.read_bytes(), prompt_field="input", answer_field="target",
                      task_type="auto")
    assert response.status_code == 201 and response.json()["task_type"] == "choice"
    math = DATASETS / "math" / "test.jsonl"
    response = upload(client, "math.jsonl", math.read_bytes(), prompt_field="problem", answer_field="answer")
    assert response.status_code == 201 and response.json()["task_type"] == "math"


def test_task_type_override_and_label_free(client):
    content = b'{"prompt": "2+2?", "answer": "4"}\n{"prompt": "Capital of France?", "answer": "4.0"}\n'
    detected = upload(client, "p.jsonl", content, answer_field="answer").json()
    assert detected["task_type"] == "numeric"
    overridden = upload(client, "p.jsonl", content, answer_field="answer", task_type="exact").json()
    assert overridden["task_type"] == "exact"
    golds = [p["gold"] for p in all_prompts(client, overridden["id"])]
    assert golds == ["4", "4.0"]
    # naming only the prompt field imports without answers, even when the file has an answer field
    label_free = upload(client, "p.jsonl", content, prompt_field="prompt", task_type="numeric").json()
    assert (label_free["has_answers"], label_free["task_type"]) == (False, "numeric")
    assert all(p["answer"] is None and p["gold"] is None for p in all_prompts(client, label_free["id"]))
    assert label_free["report"]["answer_field"] is None and not label_free["report"]["fields_guessed"]
    default = upload(client, "p.jsonl", b'{"prompt": "2+2?"}\n{"prompt": "Capital of France?"}\n').json()
    assert (default["has_answers"], default["task_type"]) == (False, "exact")
    assert "label-free" in default["report"]["task_type_reason"]


TRICKY = [
    ("q1", 'Plain prompt', "3"),
    ("q2", 'A prompt, with a comma', "-4.5"),
    ("q3", 'Line one\nline two\r\nand "quotes"', "1,234"),
    ("q4", "Unicode: café – 東京 – 🚀", "$7"),
    ("q5", "  leading and trailing spaces  ", "3/4"),
    ("q6", "Backslash \\N and \\. tab\tend", "0"),
]


def test_csv_happy_path(client):
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["id", "question", "final"])
    writer.writerows(TRICKY)
    content = buffer.getvalue().encode()
    response = upload(client, "tricky.csv", "\ufeff".encode() + content, prompt_field="question",
                      answer_field="final", id_field="id")
    assert response.status_code == 201, response.text
    pool = response.json()
    assert (pool["prompt_count"], pool["task_type"], pool["source_format"]) == (6, "numeric", "csv")
    prompts = all_prompts(client, pool["id"])
    assert [(p["external_id"], p["text"], p["answer"]) for p in prompts] == TRICKY
    assert [p["gold"] for p in prompts] == ["3", "-4.5", "1234", "7", "0.75", "0"]


def test_tsv_and_json_list(client):
    content = b"prompt\tanswer\nWhat is 1+1?\t2\nWhat is 2+3?\t5\n"
    pool = upload(client, "p.tsv", content, answer_field="answer").json()
    assert (pool["prompt_count"], pool["source_format"], pool["task_type"]) == (2, "tsv", "numeric")
    listing = json.dumps([{"prompt": "a", "answer": "(A)"}, {"prompt": "b", "answer": "(C)"}]).encode()
    pool = upload(client, "p.json", listing, answer_field="answer").json()
    assert (pool["prompt_count"], pool["task_type"]) == (2, "choice")


def test_format_field_overrides_extension(client):
    content = b'{"prompt": "a"}\n{"prompt": "b"}\n'
    pool = upload(client, "export.txt", content, format="jsonl").json()
    assert (pool["prompt_count"], pool["source_format"]) == (2, "jsonl")


def test_parquet_happy_path(client):
    n = 12_345
    table = pa.table({
        "uid": pa.array(range(1000, 1000 + n), pa.int64()),
        "prompt": [f"What is {i} + {i}?" for i in range(n)],
        "answer": pa.array([2 * i for i in range(n)], pa.int64()),
        "unused": [[1, 2]] * n,
    })
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=4000)
    response = upload(client, "p.parquet", buffer.getvalue(), answer_field="answer", id_field="uid")
    assert response.status_code == 201, response.text
    pool = response.json()
    assert (pool["prompt_count"], pool["task_type"], pool["source_format"]) == (n, "numeric", "parquet")
    prompts = all_prompts(client, pool["id"])
    assert len(prompts) == n
    assert (prompts[7]["external_id"], prompts[7]["text"], prompts[7]["answer"], prompts[7]["gold"]) == \
        ("1007", "What is 7 + 7?", "14", "14")
    assert prompts[-1]["position"] == n - 1


def test_parquet_duplicate_ids_and_nested_column(client, stored):
    before = stored()
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": ["a", "b", "a"], "prompt": ["x", "y", "z"]}), buffer)
    response = upload(client, "p.parquet", buffer.getvalue(), id_field="id")
    assert response.status_code == 422 and "row 1 and row 3" in response.json()["detail"]
    buffer = io.BytesIO()
    pq.write_table(pa.table({"prompt": [["x"], ["y"]]}), buffer)
    response = upload(client, "p.parquet", buffer.getvalue())
    assert response.status_code == 422 and "'prompt'" in response.json()["detail"]
    assert stored() == before


def test_numbers_as_ids_and_answers_in_jsonl(client):
    content = b'{"id": 1, "prompt": "a", "answer": 18}\n{"id": 2.0, "prompt": 3, "answer": 0.5}\n'
    pool = upload(client, "p.jsonl", content, answer_field="answer", id_field="id").json()
    prompts = all_prompts(client, pool["id"])
    assert [(p["external_id"], p["text"], p["answer"], p["gold"]) for p in prompts] == \
        [("1", "a", "18", "18"), ("2", "3", "0.5", "0.5")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_line_endings_and_blank_lines(client, newline):
    content = newline.join([b'{"prompt": "a"}', b"", b'{"prompt": "b"}', b"   ", b'{"prompt": "c"}']) + newline
    pool = upload(client, "p.jsonl", content).json()
    assert pool["prompt_count"] == 3
