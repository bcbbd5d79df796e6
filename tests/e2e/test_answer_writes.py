"""Each answer goes out in one write (werk.coalescing): a client reading as soon as anything
arrives gets the whole of a small answer in one read, not its head first and its body after.
Holding a write must not hold anything back: keep-alive and pipelined requests are answered in
order, a streamed answer's parts arrive while the app still waits, and a client that does not
read still stops a writer (pause_writing)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from tests.support.server import ServerProcess, free_port
from werk.connections import ConnectionLimits, LimitedConfig

ROUNDS = 50
CHUNK = 64 * 1024
STREAMED = 1024 * CHUNK  # far more than the socket buffers of both ends hold


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _request(port: int, method: str, path: str, body: dict[str, object] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return int(value)
    raise AssertionError(f"no content-length in {head!r}")


def _whole(received: bytes) -> bool:
    head, found, body = received.partition(b"\r\n\r\n")
    return bool(found) and len(body) == _length(head)


def _answers(sock: socket.socket, count: int) -> list[tuple[bytes, bytes]]:
    """``count`` answers (status line, body) read off ``sock`` in the order they came."""
    buffer = b""
    answers = []
    while len(answers) < count:
        head, found, rest = buffer.partition(b"\r\n\r\n")
        if found and len(rest) >= _length(head):
            length = _length(head)
            answers.append((head.split(b"\r\n")[0], rest[:length]))
            buffer = rest[length:]
            continue
        data = sock.recv(65536)
        assert data, "the server closed the connection"
        buffer += data
    return answers


def test_a_small_answer_arrives_in_one_read(werk_server: ServerProcess):
    port = werk_server.port
    push = _request(port, "POST", "/v1/jobs", {"jobtype": "one-read", "args": [1, "two"]})
    livez = _request(port, "GET", "/livez")
    split = 0
    with _connect(port) as sock:
        for request in (push, livez) * ROUNDS:
            sock.sendall(request)
            received = sock.recv(65536)  # returns as soon as anything has arrived
            if not _whole(received):
                split += 1
                while not _whole(received):
                    received += sock.recv(65536)
    assert split == 0


def test_pipelined_requests_are_answered_in_order(werk_server: ServerProcess):
    port = werk_server.port
    requests = [
        _request(port, "GET", "/livez"),
        _request(port, "POST", "/v1/jobs", {"jid": "pipelined-1", "jobtype": "p", "args": []}),
        _request(port, "GET", "/v1/jobs/pipelined-1"),
        _request(port, "GET", "/v1/jobs/pipelined-2"),
        _request(port, "POST", "/v1/jobs", {"jid": "pipelined-2", "jobtype": "p", "args": []}),
        _request(port, "GET", "/v1/jobs/pipelined-2"),
    ]
    with _connect(port) as sock:
        sock.sendall(b"".join(requests))
        answers = _answers(sock, len(requests))
        statuses = [status.split(b" ")[1] for status, _ in answers]
        assert statuses == [b"200", b"201", b"200", b"404", b"201", b"200"]
        assert json.loads(answers[2][1])["jid"] == "pipelined-1"
        assert json.loads(answers[5][1])["jid"] == "pipelined-2"
        # The connection is still kept alive after them.
        sock.sendall(requests[0])
        assert _answers(sock, 1)[0][0].startswith(b"HTTP/1.1 200")


def test_an_answer_before_close_arrives_whole(werk_server: ServerProcess):
    port = werk_server.port
    request = _request(port, "GET", "/livez").replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    with _connect(port) as sock:
        sock.sendall(request)
        received = b""
        while data := sock.recv(65536):
            received += data
    assert _whole(received)
    assert b"connection: close" in received.lower()


class _Streaming:
    """uvicorn with Werk's protocol, serving a streamed answer (its parts sent as the test
    releases them) and a large one (whose progress the test watches), in a thread of its own
    with uvloop, as `werk serve` runs."""

    def __init__(self) -> None:
        self.port = free_port()
        self.release = threading.Event()
        self.sent = 0
        config = LimitedConfig(
            ConnectionLimits(
                header_timeout=10, body_timeout=10, max_connections=100, max_header_bytes=65536
            ),
            app=self.app,
            host="127.0.0.1",
            port=self.port,
            loop="uvloop",
            interface="asgi3",
            lifespan="off",
            log_level="warning",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if scope["path"] == "/head-first":
            await self._released()
            await send({"type": "http.response.body", "body": b"after the wait"})
        elif scope["path"] == "/parts":
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            await self._released()
            await send({"type": "http.response.body", "body": b"second"})
        else:
            while self.sent < STREAMED:
                await send({"type": "http.response.body", "body": b"x" * CHUNK, "more_body": True})
                self.sent += CHUNK
            await send({"type": "http.response.body", "body": b""})

    async def _released(self) -> None:
        while not self.release.is_set():
            await asyncio.sleep(0.01)

    def __enter__(self) -> _Streaming:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def streaming() -> Iterator[_Streaming]:
    with _Streaming() as server:
        yield server


def _read_until(sock: socket.socket, end: bytes) -> bytes:
    received = b""
    while end not in received:
        data = sock.recv(65536)
        assert data, "the server closed the connection"
        received += data
    return received


def test_a_head_goes_out_while_the_body_is_not_ready(streaming: _Streaming):
    with _connect(streaming.port) as sock:
        sock.sendall(_request(streaming.port, "GET", "/head-first"))
        head = _read_until(sock, b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head
        assert not streaming.release.is_set()
        streaming.release.set()
        assert b"after the wait" in _read_until(sock, b"0\r\n\r\n")


def test_a_streamed_answer_streams(streaming: _Streaming):
    with _connect(streaming.port) as sock:
        sock.sendall(_request(streaming.port, "GET", "/parts"))
        assert _read_until(sock, b"5\r\nfirst\r\n").startswith(b"HTTP/1.1 200")
        streaming.release.set()
        assert _read_until(sock, b"0\r\n\r\n") == b"6\r\nsecond\r\n0\r\n\r\n"


def test_a_client_that_does_not_read_stops_the_writer(streaming: _Streaming):
    with _connect(streaming.port) as sock:
        sock.sendall(_request(streaming.port, "GET", "/large"))
        time.sleep(0.5)
        stalled = streaming.sent
        time.sleep(0.3)
        assert streaming.sent == stalled < STREAMED
        received = 0
        data = b""
        while not data.endswith(b"\r\n0\r\n\r\n"):
            data = sock.recv(1 << 20)
            assert data, "the server closed the connection"
            received += len(data)
        assert streaming.sent == STREAMED
        assert received > STREAMED  # the body and its chunks' framing
