"""Every kind of bad upload: the status, a message that names the line and field and says what to do,
and nothing stored (no new pool, no prompt rows, the existing pools untouched)."""

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pools.conftest import upload


def jsonl(*objects) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


@pytest.fixture
def unchanged(client, stored):
    """Asserts after the test that no pool or prompt was added or lost (an existing pool is kept)."""
    existing = client.post("/api/pools/demo")
    assert existing.status_code == 201
    before = stored()
    yield
    assert stored() == before
    kept = client.get(f"/api/pools/{existing.json()['id']}")
    assert kept.status_code == 200 and kept.json()["prompt_count"] == 200


def rejected(response, status: int, *fragments: str) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    for fragment in fragments:
        assert fragment in detail, f"{fragment!r} not in {detail!r}"
    return detail


def test_malformed_json_line_is_named(client, unchanged):
    content = jsonl({"prompt": "a"}, {"prompt": "b"}) + b'{"prompt": "c", \n' + jsonl({"prompt": "d"})
    rejected(upload(client, "pool.jsonl", content), 400, "Line 3", "not valid JSON", "fix or remove line 3")


def test_json_line_that_is_not_an_object(client, unchanged):
    rejected(upload(client, "pool.jsonl", jsonl({"prompt": "a"}, ["b"])), 400, "Line 2", "an array",
             "not a JSON object")


def test_malformed_line_after_many_rows_leaves_nothing(client, unchanged):
    # The error comes after several 5,000-row batches were already copied into the database.
    rows = [{"prompt": f"p{i}", "answer": str(i)} for i in range(12_000)]
    content = jsonl(*rows) + b"{broken\n"
    rejected(upload(client, "big.jsonl", content, answer_field="answer"), 400, "Line 12001")


def test_csv_with_broken_quoting(client, unchanged):
    content = b'prompt,answer\n"What is 1+1?",2\n"What is "2+2"?,4\n"ok",1\n'
    rejected(upload(client, "pool.csv", content, answer_field="answer"), 400, "line 3", "double quotes")


def test_csv_with_unclosed_quote(client, unchanged):
    content = b'prompt,answer\n"What is 1+1?",2\n"What is 2+2?,4\nthree,3\n'
    rejected(upload(client, "pool.csv", content, answer_field="answer"), 400, "line 3", "never closed")


def test_csv_row_with_extra_fields(client, unchanged):
    content = b"prompt,answer\nWhat is 1+1?,2\nWhat is 2,000 + 1?,2001\n"
    rejected(upload(client, "pool.csv", content, answer_field="answer"), 400, "line 3", "3 field(s)",
             "header has 2")


def test_bytes_that_are_not_utf8_jsonl(client, unchanged):
    content = jsonl({"prompt": "fine"}) + '{"prompt": "café"}\n'.encode("latin-1")
    rejected(upload(client, "pool.jsonl", content), 400, "Line 2", "not UTF-8", "0xe9", "UTF-8")


def test_bytes_that_are_not_utf8_csv(client, unchanged):
    content = b"prompt\nfine\nalso fine\n" + "na\u00efve\n".encode("cp1252")
    rejected(upload(client, "pool.csv", content), 400, "Line 4", "not UTF-8")


def test_bytes_that_are_not_utf8_far_into_the_file(client, unchanged):
    # Past the first 1 MiB read block: the line number still counts from the start of the file.
    rows = jsonl(*({"prompt": "x" * 100} for _ in range(20_000)))
    rejected(upload(client, "pool.jsonl", rows + b'{"prompt": "\xff"}\n'), 400, "Line 20001", "not UTF-8")


@pytest.mark.parametrize("filename,content", [("empty.jsonl", b""), ("blank.jsonl", b"\n  \n\n"),
                                              ("header.csv", b"prompt,answer\n"), ("empty.parquet", b"")])
def test_empty_file(client, unchanged, filename, content):
    rejected(upload(client, filename, content), 400, "empty" if b"prompt" not in content else "no rows")


def test_empty_parquet_table(client, unchanged):
    buffer = io.BytesIO()
    pq.write_table(pa.table({"prompt": pa.array([], pa.string())}), buffer)
    rejected(upload(client, "none.parquet", buffer.getvalue()), 400, "no rows")


def test_file_over_the_size_limit(client, unchanged, monkeypatch):
    from backend.settings import get_settings

    monkeypatch.setattr(get_settings(), "max_upload_bytes", 1000)
    small_over = jsonl(*({"prompt": f"prompt {i}"} for i in range(200)))  # ~4 KB: counted while reading
    rejected(upload(client, "pool.jsonl", small_over), 413, "upload limit", "1000 bytes")
    big = jsonl(*({"prompt": "x" * 1000} for i in range(3000)))  # ~3 MB: refused from Content-Length
    rejected(upload(client, "pool.jsonl", big), 413, "BUDGETLAB_MAX_UPLOAD_BYTES")


def test_streamed_body_over_the_limit_without_content_length(app, stored, monkeypatch):
    """A chunked upload (no Content-Length) is cut off at the limit while it is read."""
    import asyncio

    import httpx

    from backend.settings import get_settings
    from tests.conftest import ADMIN_TOKEN

    monkeypatch.setattr(get_settings(), "max_upload_bytes", 1000)
    before = stored()
    boundary = "xyzBOUNDARY"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"p.jsonl\"\r\n\r\n").encode()
    sent = []

    async def body():
        yield head
        for i in range(2000):  # 2000 x 1 KiB = 2 MB of body, far over limit + overhead
            sent.append(i)
            yield b'{"prompt": "' + b"x" * 1000 + b'"}\n'
        yield f"\r\n--{boundary}--\r\n".encode()

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.post("/api/pools", content=body(), headers={
                "Authorization": f"Bearer {ADMIN_TOKEN}",
                "Content-Type": f"multipart/form-data; boundary={boundary}"})

    response = asyncio.run(run())
    assert response.status_code == 413, response.text
    assert len(sent) < 2000  # refused before the whole body was read
    assert stored() == before


def test_unknown_format(client, unchanged):
    rejected(upload(client, "pool.txt", jsonl({"prompt": "a"})), 415, "'pool.txt'", "JSON Lines", "Parquet",
             "format=")
    rejected(upload(client, "pool.jsonl", jsonl({"prompt": "a"}), format="xml"), 415, "'xml'", "CSV")


def test_not_a_parquet_file(client, unchanged):
    rejected(upload(client, "pool.parquet", b"this is not parquet at all"), 400, "not a readable Parquet file")


def test_missing_prompt_field_lists_the_fields(client, unchanged):
    content = jsonl({"question": "What is 2+2?", "answer": "#### 4"})
    detail = rejected(upload(client, "pool.jsonl", content, prompt_field="prompt"), 422, "Line 1", "no field 'prompt'",
                      "'question'", "'answer'", "prompt_field=", "preset=gsm8k")
    assert "fields that exist" in detail


def test_no_field_named_and_none_looks_like_a_prompt(client, unchanged):
    content = jsonl({"text": "What is 2+2?", "result": "4"})
    rejected(upload(client, "pool.jsonl", content), 422, "Line 1", "no field named prompt or question or problem or "
             "input or query for the prompt", "'text'", "'result'", "prompt_field=")


def test_missing_prompt_field_in_a_later_line(client, unchanged):
    content = jsonl({"text": "a"}, {"text": "b"}, {"txt": "c"})
    rejected(upload(client, "pool.jsonl", content, prompt_field="text"), 422, "Line 3", "no field 'text'", "'txt'")


def test_missing_prompt_field_csv_and_parquet(client, unchanged):
    rejected(upload(client, "pool.csv", b"body,solution\nq,1\n"), 422, "header", "'body'", "'solution'")
    buffer = io.BytesIO()
    pq.write_table(pa.table({"input": ["a"], "target": ["(A)"]}), buffer)
    rejected(upload(client, "pool.parquet", buffer.getvalue(), prompt_field="prompt"), 422, "'input'", "'target'",
             "preset=bbh")


def test_missing_answer_field_lists_the_fields(client, unchanged):
    content = jsonl({"prompt": "What is 2+2?", "solution": "4"})
    rejected(upload(client, "pool.jsonl", content, answer_field="answer"), 422, "no field 'answer'", "'solution'",
             "label-free")


def test_empty_prompts_name_the_first_lines(client, unchanged):
    content = jsonl({"prompt": "a"}, {"prompt": ""}, {"prompt": "b"}, {"prompt": "   "}, {"prompt": None})
    rejected(upload(client, "pool.jsonl", content), 422, "3 empty prompts", "field 'prompt'", "lines 2, 4, 5")


def test_empty_prompts_in_csv(client, unchanged):
    content = b"id,prompt\n1,fine\n2,\n3,fine too\n"
    rejected(upload(client, "pool.csv", content, id_field="id"), 422, "1 empty prompt ", "(line 3)")


def test_duplicate_ids_name_both_lines(client, unchanged):
    content = jsonl({"id": "a", "prompt": "p"}, {"id": "b", "prompt": "p"}, {"id": "c", "prompt": "p"},
                    {"id": "d", "prompt": "p"}, {"id": "b", "prompt": "p"})
    rejected(upload(client, "pool.jsonl", content, id_field="id"), 422, "Duplicate id 'b'", "field 'id'",
             "line 2 and line 5")


def test_duplicate_ids_numbers_and_strings(client, unchanged):
    content = jsonl({"id": 7, "prompt": "p"}, {"id": "7", "prompt": "q"})
    rejected(upload(client, "pool.jsonl", content, id_field="id"), 422, "Duplicate id '7'", "line 1 and line 2")


def test_empty_id(client, unchanged):
    rejected(upload(client, "pool.jsonl", jsonl({"id": "a", "prompt": "p"}, {"id": "", "prompt": "q"}),
                    id_field="id"), 422, "Line 2", "empty id", "field 'id'")


def test_ungradeable_answers_count_and_examples(client, unchanged):
    content = jsonl({"prompt": "a", "answer": "12"}, {"prompt": "b", "answer": "twelve"},
                    {"prompt": "c", "answer": "#### 7"}, {"prompt": "d", "answer": "(B) maybe"},
                    {"prompt": "e", "answer": ""})
    detail = rejected(upload(client, "pool.jsonl", content, answer_field="answer", task_type="numeric"), 422,
                      "3 of 5 answers", "field 'answer'", "numeric", "line 2: 'twelve'", "line 4: '(B) maybe'",
                      "line 5: no answer", "no answer_field")
    assert "accepted as exact (send task_type" in detail  # the task type that would accept those answers


def test_ungradeable_choice_answers(client, unchanged):
    content = jsonl({"input": "q1", "target": "(A)"}, {"input": "q2", "target": "(AB)"})
    rejected(upload(client, "pool.jsonl", content, prompt_field="input", answer_field="target",
                    task_type="choice"), 422, "1 of 2 answers", "line 2: '(AB)'")


def test_empty_prompts_and_bad_answers_reported_together(client, unchanged):
    content = jsonl({"prompt": "", "answer": "1"}, {"prompt": "b", "answer": "x"})
    rejected(upload(client, "pool.jsonl", content, answer_field="answer", task_type="numeric"), 422,
             "(1) 1 empty prompt ", "(2) 1 of 1 answers")


def test_unknown_task_type_and_preset(client, unchanged):
    rejected(upload(client, "pool.jsonl", jsonl({"prompt": "a"}), task_type="multiple"), 422, "'multiple'",
             "numeric, math, choice, exact")
    rejected(upload(client, "pool.jsonl", jsonl({"prompt": "a"}), preset="mmlu"), 422, "'mmlu'", "gsm8k")


def test_nul_character(client, unchanged):
    rejected(upload(client, "pool.jsonl", jsonl({"prompt": "a\u0000b"})), 422, "Line 1", "NUL")


def test_form_without_a_file(client, unchanged):
    response = client.post("/api/pools", data={"name": "x"}, files={"other": ("a.txt", b"x")})
    rejected(response, 422, "'file'")
    rejected(client.post("/api/pools", json={"file": "x"}), 415, "multipart/form-data")


def test_no_token_or_wrong_token(client, stored):
    before = stored()
    files = {"file": ("pool.jsonl", jsonl({"prompt": "a"}))}
    assert client.post("/api/pools", files=files, headers={"Authorization": ""}).status_code == 401
    assert client.post("/api/pools", files=files, headers={"Authorization": "Bearer nope"}).status_code == 401
    for method, path in (("get", "/api/pools"), ("get", "/api/pools/1"), ("get", "/api/pools/1/prompts"),
                         ("delete", "/api/pools/1"), ("post", "/api/pools/demo")):
        response = getattr(client, method)(path, headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401, (method, path)
    assert stored() == before
