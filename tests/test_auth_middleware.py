"""Who calls and whether their role may is checked before routing, and JSON bodies are capped, on a live uvicorn
server.

"Without reading the body" is measured twice: the client sends the body piece by piece and stops
as soon as a response arrives (so most of a 50 MB body is never sent), and an ASGI wrapper around
the app counts the body bytes the application received (none).
"""

import select
import socket
import threading
import time

import pytest
import uvicorn

from backend.body_limit import MAX_JSON_BODY_BYTES
from tests.conftest import ADMIN_TOKEN

BIG = 50 * 1024 * 1024
PIECE = 64 * 1024
PACE_SECONDS = 0.02


class BodyCounter:
    """Counts the request-body bytes the wrapped application pulls through `receive`."""

    def __init__(self, app):
        self.app = app
        self.received = 0

    async def __call__(self, scope, receive, send):
        async def counting_receive():
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
            return message

        await self.app(scope, counting_receive, send)


@pytest.fixture(scope="module")
def live(app):
    counter = BodyCounter(app)
    server = uvicorn.Server(uvicorn.Config(counter, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (server.started and server.servers):
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield port, counter
    server.should_exit = True
    thread.join(timeout=10)


def send_until_answered(port: int, head: str, body_pieces) -> tuple[bytes, int]:
    """Send the request head, then body pieces until the server answers; return (response, bytes sent)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head.encode())
        response = b""
        for piece in body_pieces:
            # Paced (about 3 MB/s), so the client, not the socket buffers, decides how much goes out
            # before an early answer can arrive.
            readable, _, _ = select.select([sock], [], [], PACE_SECONDS)
            if readable:
                break
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        sock.settimeout(10)
        try:
            while b"\r\n\r\n" not in response and (data := sock.recv(65536)):
                response += data
            head, _, body = response.partition(b"\r\n\r\n")
            length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), b"0"))
            while len(body) < length and (data := sock.recv(65536)):
                body += data
            response = head + b"\r\n\r\n" + body
        except (TimeoutError, ConnectionResetError):
            pass
    return response, sent


def _head(path: str, *, token: str | None, length: int | None) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: test", "Content-Type: application/json"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return "\r\n".join(lines) + "\r\n\r\n"


def _json_pieces(total: int):
    """A JSON object of `total` bytes, in pieces, generated lazily (never held whole)."""
    yield b'{"name": "'
    for _ in range((total - 12) // PIECE):
        yield b"x" * PIECE
    yield b'"}'


def _chunked(pieces):
    for piece in pieces:
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


@pytest.mark.parametrize("token", [None, "not-a-token"])
def test_unauthenticated_50mb_post_is_401_without_the_body_being_read(live, token):
    port, counter = live
    before = counter.received
    response, sent = send_until_answered(port, _head("/api/subsets", token=token, length=BIG), _json_pieces(BIG))
    assert _status(response) == 401
    expected = b"Not signed in" if token is None else b"Invalid credentials"
    assert b"application/problem+json" in response and expected in response
    assert counter.received == before, "the application read body bytes of an unauthenticated request"
    assert sent < BIG // 10, f"the client had to send {sent} of {BIG} bytes before the 401"


def test_a_50mb_post_by_a_role_that_may_not_is_403_without_the_body_being_read(live):
    from backend.auth.service import create_token, create_user
    from backend.database import session_scope

    with session_scope() as session:
        viewer = create_user(session, f"viewer-{time.monotonic_ns()}", "viewer")
        token = create_token(session, viewer, "big post")[1]
    port, counter = live
    before = counter.received
    response, sent = send_until_answered(port, _head("/api/subsets", token=token, length=BIG), _json_pieces(BIG))
    assert _status(response) == 403 and b"needs the manager role" in response
    assert counter.received == before, "the application read body bytes of a request its role may not make"
    assert sent < BIG // 10, f"the client had to send {sent} of {BIG} bytes before the 403"


def test_authenticated_oversized_json_is_413_by_content_length(live):
    port, counter = live
    before = counter.received
    size = MAX_JSON_BODY_BYTES + 1024
    response, sent = send_until_answered(port, _head("/api/subsets", token=ADMIN_TOKEN, length=size),
                                         _json_pieces(size))
    assert _status(response) == 413 and b"application/problem+json" in response
    assert counter.received == before  # refused from the header, before any byte was read


def _send_chunked_oversized_json(live, path: str) -> int:
    """POST 50 MB of chunked JSON with the admin token; asserts a 413 problem that came within one
    server read of the cap (not after the 50 MB on offer). Returns the bytes the client sent."""
    port, counter = live
    before = counter.received
    response, sent = send_until_answered(port, _head(path, token=ADMIN_TOKEN, length=None),
                                         _chunked(_json_pieces(BIG)))
    assert _status(response) == 413 and b"application/problem+json" in response
    assert counter.received - before <= 2 * MAX_JSON_BODY_BYTES, counter.received - before
    return sent


def test_authenticated_oversized_chunked_json_is_413_while_streaming(live):
    assert _send_chunked_oversized_json(live, "/api/subsets") < BIG // 10


def test_json_body_under_the_cap_still_reaches_the_api(client):
    # 1 MiB minus a little of valid JSON is parsed: the cap is not an accident on ordinary bodies.
    name = "x" * (MAX_JSON_BODY_BYTES - 200)
    response = client.post("/api/subsets", json={"name": name})
    assert response.status_code == 422 and response.headers["content-type"] == "application/problem+json"
    assert {"probe_id", "strategy", "budget"} <= {e["loc"][-1] for e in response.json()["errors"]}


def test_the_upload_is_not_capped_at_one_mib(client):
    # Over the JSON cap, under BUDGETLAB_MAX_UPLOAD_BYTES: the upload's own limit applies, not 1 MiB.
    rows = b"".join(b'{"prompt": "What is %d + %d? Answer with a number, padded: %s"}\n' % (i, i, b"y" * 200)
                    for i in range(6000))
    assert len(rows) > MAX_JSON_BODY_BYTES
    response = client.post("/api/pools", files={"file": ("big.jsonl", rows)})
    assert response.status_code == 201, response.text
    assert response.json()["prompt_count"] == 6000
    client.delete(f"/api/pools/{response.json()['id']}")


def test_json_sent_to_the_upload_path_is_capped_like_any_json(live):
    # Only a multipart upload has its own limit; a JSON body to the same path must not be read whole.
    _send_chunked_oversized_json(live, "/api/pools")


def test_health_and_docs_need_no_token(client):
    anonymous = {"Authorization": ""}
    for path in ("/api/health", "/openapi.json", "/docs"):
        assert client.get(path, headers=anonymous).status_code == 200, path
