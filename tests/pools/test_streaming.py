"""The upload is imported while it arrives: chunked bodies, options sent after the file, errors
mid-stream, duplicate checks that re-read what has arrived so far."""

import asyncio
import json

import httpx

from backend.pools import ingest
from tests.conftest import ADMIN_TOKEN

BOUNDARY = "budgetlabTestBoundary"


def multipart(parts: list[tuple[str, bytes | str, str | None]]) -> bytes:
    """A multipart body from (field name, value, file name or None), in the order given."""
    body = b""
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        body += value if isinstance(value, bytes) else value.encode()
        body += b"\r\n"
    return body + f"--{BOUNDARY}--\r\n".encode()


def post_chunked(app, body: bytes, chunk: int = 1000) -> httpx.Response:
    """POST /api/pools with `body` sent in `chunk`-byte pieces (no Content-Length)."""

    async def pieces():
        for i in range(0, len(body), chunk):
            yield body[i:i + chunk]
            await asyncio.sleep(0)

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as http:
            return await http.post("/api/pools", content=pieces(), headers={
                "Authorization": f"Bearer {ADMIN_TOKEN}",
                "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})

    return asyncio.run(run())


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def spy(monkeypatch, owner, name: str) -> list:
    """Record the calls of owner.name (still calling it)."""
    calls, original = [], getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def test_chunked_upload_streams_into_a_pool(app, client, monkeypatch):
    from backend.pools import router

    reads = spy(monkeypatch, router._ByteStream, "read")
    rows = [{"id": f"q{i}", "question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(3000)]
    body = multipart([("preset", "gsm8k", None), ("id_field", "id", None), ("name", "chunked", None),
                      ("file", jsonl(rows), "gsm.jsonl")])
    response = post_chunked(app, body, chunk=777)
    assert response.status_code == 201, response.text
    pool = response.json()
    assert (pool["name"], pool["prompt_count"], pool["task_type"]) == ("chunked", 3000, "numeric")
    page = client.get(f"/api/pools/{pool['id']}/prompts", params={"offset": 2999}).json()
    assert page["items"][0]["external_id"] == "q2999" and page["items"][0]["gold"] == "3000"
    assert reads  # imported from the wire through the stream, not from the saved copy


def test_options_sent_after_the_file_are_honoured(app, client, stored, monkeypatch):
    from backend.pools import service

    imports = spy(monkeypatch, service, "import_pool")
    # curl -F file=@pool.jsonl -F prompt_field=question ... puts the options last: the import that
    # started with the default options ("prompt" is missing) is discarded and redone with them.
    before = stored()
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(50)]
    body = multipart([("file", jsonl(rows), "pool.jsonl"), ("prompt_field", "question", None),
                      ("answer_field", "answer", None), ("task_type", "exact", None)])
    response = post_chunked(app, body, chunk=100)
    assert response.status_code == 201, response.text
    pool = response.json()
    assert (pool["prompt_count"], pool["task_type"], pool["has_answers"]) == (50, "exact", True)
    assert stored() == (before[0] + 1, before[1] + 50)
    assert len(imports) == 2  # streamed with incomplete options, then redone from the saved copy


def test_format_sent_after_the_file(app):
    body = multipart([("file", b'{"prompt": "a"}\n', "export.txt"), ("format", "jsonl", None)])
    response = post_chunked(app, body)
    assert response.status_code == 201 and response.json()["source_format"] == "jsonl"


def test_error_mid_stream_leaves_nothing(app, stored):
    before = stored()
    rows = [{"prompt": f"p{i}", "answer": str(i)} for i in range(20_000)]
    content = jsonl(rows[:12_000]) + b"{oops\n" + jsonl(rows[12_000:])
    body = multipart([("answer_field", "answer", None), ("file", content, "pool.jsonl")])
    response = post_chunked(app, body, chunk=65536)
    assert response.status_code == 400 and "Line 12001" in response.json()["detail"]
    assert stored() == before


def test_duplicate_check_rereads_what_has_arrived(app, stored, monkeypatch):
    monkeypatch.setattr(ingest, "_id_hash", lambda _id: 7)  # every id "collides": each is verified
    rows = [{"id": f"id-{i}", "prompt": f"p{i}"} for i in range(300)]
    body = multipart([("id_field", "id", None), ("file", jsonl(rows), "pool.jsonl")])
    response = post_chunked(app, body, chunk=512)
    assert response.status_code == 201 and response.json()["prompt_count"] == 300
    before = stored()
    body = multipart([("id_field", "id", None), ("file", jsonl(rows + [{"id": "id-123", "prompt": "x"}]),
                                                  "pool.jsonl")])
    response = post_chunked(app, body, chunk=512)
    assert response.status_code == 422 and "line 124 and line 301" in response.json()["detail"]
    assert stored() == before


def test_parquet_waits_for_the_whole_file(app, client):
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"prompt": [f"p{i}" for i in range(5000)]}), buffer, row_group_size=1000)
    response = post_chunked(app, multipart([("file", buffer.getvalue(), "p.parquet")]), chunk=4096)
    assert response.status_code == 201 and response.json()["prompt_count"] == 5000


def test_bbh_document_streamed(app):
    from tests.conftest import DATASETS

    content = (DATASETS / "bbh" / "tracking_shuffled_objects_five_objects.json").read_bytes()
    examples = len(json.loads(content)["examples"])
    assert len(content) > 5 * 3000  # streamed in several chunks
    response = post_chunked(app, multipart([("preset", "bbh", None), ("file", content, "five.json")]), chunk=3000)
    assert response.status_code == 201, response.text
    assert (response.json()["prompt_count"], response.json()["task_type"]) == (examples, "choice")


def test_two_files_refused(app, stored):
    before = stored()
    body = multipart([("file", b'{"prompt": "a"}\n', "a.jsonl"), ("file", b'{"prompt": "b"}\n', "b.jsonl")])
    response = post_chunked(app, body)
    assert response.status_code == 422 and "exactly one file" in response.json()["detail"]
    assert stored() == before


def test_truncated_body_is_refused(app, stored):
    before = stored()
    rows = [{"prompt": f"p{i}"} for i in range(5000)]
    body = multipart([("file", jsonl(rows), "pool.jsonl")])
    response = post_chunked(app, body[: len(body) // 2], chunk=4096)
    assert response.status_code == 400 and "closing boundary" in response.json()["detail"]
    assert stored() == before
