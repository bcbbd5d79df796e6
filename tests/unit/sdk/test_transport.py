"""The SDK's own HTTP/1.1 connections (werk_client.transport) against a scripted server on
loopback: answer framings, keep-alive reuse, lost connections, timeouts and TLS, for the
blocking and the asyncio pool alike."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from werk_client import Client, RetryPolicy, Unavailable
from werk_client.transport import (
    AsyncPool,
    ConnectError,
    Origin,
    ReadError,
    ReadTimeout,
    Response,
    SyncPool,
)

BODY = b'{"state":"quiet"}'
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b" % (
    len(BODY),
    BODY,
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'5;ext=1\r\n{"sta\r\nc\r\nte":"quiet"}\r\n0\r\nX-Trailer: t\r\n\r\n'
)
INTERIM = b"HTTP/1.1 100 Continue\r\n\r\n" + OK
CLOSE = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%b" % (len(BODY), BODY)
HTTP10 = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY
EMPTY = b"HTTP/1.1 204 No Content\r\n\r\n"
REQUEST = b"POST /v1/beat HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"

# What the server does with one request: bytes to send back (in pieces, each sent apart),
# "hang" (read it, answer nothing), or "drop" (read it and close the connection).
Script = bytes | list[bytes] | str


class ScriptedServer:
    """Answers each request (of any connection) with the next entry of ``script``."""

    def __init__(self, script: list[Script], tls: ssl.SSLContext | None = None) -> None:
        self.script = list(script)
        self.connections = 0
        self.requests: list[bytes] = []
        self._tls = tls
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self._tls is not None:
            try:
                conn = self._tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):
                conn.close()
                return
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + rest[:length])
                buf = rest[length:]
                step = self.script.pop(0) if self.script else OK
                if step == "hang":
                    time.sleep(5)
                    return
                if step == "drop":
                    return
                pieces = step if isinstance(step, list) else [step]
                for piece in pieces:
                    conn.sendall(piece)
                    time.sleep(0.002)
                if b"".join(pieces).startswith(b"HTTP/1.0"):
                    return  # an HTTP/1.0 answer without a length ends with the connection

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._listener.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def server() -> Iterator[Callable[..., ScriptedServer]]:
    started: list[ScriptedServer] = []

    def start(script: list[Script], tls: ssl.SSLContext | None = None) -> ScriptedServer:
        started.append(ScriptedServer(script, tls))
        return started[-1]

    yield start
    for s in started:
        s.close()


def sync_call(url: str, data: bytes = REQUEST, timeout: float = 5.0) -> Response:
    pool = SyncPool(Origin.parse(url), 5.0)
    try:
        return pool.request(data, timeout)
    finally:
        pool.close()


def bytewise(answer: bytes) -> list[bytes]:
    return [answer[i : i + 1] for i in range(len(answer))]


@pytest.mark.parametrize(
    ("answer", "status", "body"),
    [
        (OK, 200, BODY),
        (bytewise(OK), 200, BODY),
        (CHUNKED, 200, BODY),
        (bytewise(CHUNKED), 200, BODY),
        (INTERIM, 200, BODY),
        (HTTP10, 200, BODY),
        (EMPTY, 204, b""),
    ],
    ids=["length", "length-bytewise", "chunked", "chunked-bytewise", "interim", "http10", "204"],
)
async def test_answer_framings(server, answer, status, body):
    s = server([answer, answer])
    response = await asyncio.to_thread(sync_call, s.url)
    assert (response.status_code, response.content) == (status, body)
    pool = AsyncPool(Origin.parse(s.url), 5.0)
    response = await pool.request(REQUEST, 5.0)
    pool.close()
    assert (response.status_code, response.content) == (status, body)


async def test_headers_are_read_when_asked():
    from werk_client.transport import take_answer

    raw = bytearray(
        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nX-A: 1\r\nx-a: 2\r\n"
        b"Content-Length: 0\r\n\r\n"
    )
    answer = take_answer(raw, eof=False)
    assert answer is not None and not raw
    response, keep = answer
    assert keep and response.status_code == 503
    assert response.reason_phrase == "Service Unavailable"
    assert response.headers["retry-after"] == "2" and response.headers["x-a"] == "1, 2"


def test_blocking_pool_reuses_its_connection_and_honours_close(server):
    s = server([OK, OK, CLOSE, OK])
    pool = SyncPool(Origin.parse(s.url), 5.0)
    try:
        for _ in range(4):
            assert pool.request(REQUEST, 5.0).content == BODY
    finally:
        pool.close()
    assert s.connections == 2  # the third answer closed the first connection


async def test_asyncio_pool_reuses_its_connection_and_honours_close(server):
    s = server([OK, OK, CLOSE, OK])
    pool = AsyncPool(Origin.parse(s.url), 5.0)
    for _ in range(4):
        assert (await pool.request(REQUEST, 5.0)).content == BODY
    pool.close()
    assert s.connections == 2


async def test_lost_connections_and_silence_are_typed_errors(server):
    s = server(["drop", "hang", [b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{"]])
    with pytest.raises(ReadError):
        await asyncio.to_thread(sync_call, s.url)
    with pytest.raises(ReadTimeout):
        await asyncio.to_thread(sync_call, s.url, REQUEST, 0.3)
    pool = AsyncPool(Origin.parse(s.url), 5.0)
    with pytest.raises(ReadError):  # cut short: the server closes in the middle of the body
        await pool.request(REQUEST, 5.0)
    s.script = ["drop", "hang"]
    with pytest.raises(ReadError):
        await pool.request(REQUEST, 5.0)
    with pytest.raises(ReadTimeout):
        await pool.request(REQUEST, 0.3)
    pool.close()


async def test_refused_connections_are_not_sent():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ConnectError):
        await asyncio.to_thread(sync_call, url)
    with pytest.raises(ConnectError):
        await AsyncPool(Origin.parse(url), 5.0).request(REQUEST, 5.0)


def test_a_connection_the_server_closed_while_idle_is_not_reused(server, monkeypatch):
    import werk_client.transport as transport

    monkeypatch.setattr(transport, "_CHECK_AFTER", 0.0)
    s = server([CLOSE.replace(b"Connection: close\r\n", b""), "drop"])
    pool = SyncPool(Origin.parse(s.url), 5.0)
    try:
        assert pool.request(REQUEST, 5.0).content == BODY
        time.sleep(0.1)  # the server closed the connection after its answer ("drop" is next)
        s.script = [OK]
        assert pool.request(REQUEST, 5.0).content == BODY
    finally:
        pool.close()


def test_the_client_retries_lost_answers_of_repeatable_requests_only(server):
    s = server(["drop", OK, "drop"])
    with Client(s.url, retry=RetryPolicy(attempts=3, base=0.001, cap=0.002)) as client:
        assert client.beat("w1") == "quiet"  # a beat may be repeated: sent again
        with pytest.raises(Unavailable) as lost:
            client.fetch(["q"], wid="w1")  # a fetch may have leased jobs: not repeated
    assert lost.value.code == "unreachable" and lost.value.status is None
    assert [r.split(b" ")[1] for r in s.requests] == [b"/v1/beat", b"/v1/beat", b"/v1/fetch"]


def test_requests_carry_the_token_agent_prefix_and_json(server):
    s = server([OK])
    with Client(s.url + "/werk/", token="secret-token") as client:
        client.beat("w1")
    head, _, body = s.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /werk/v1/beat HTTP/1.1"
    assert b"Authorization: Bearer secret-token" in lines
    assert b"Content-Type: application/json" in lines
    assert any(line.startswith(b"User-Agent: werk-client-python/") for line in lines)
    assert body == b'{"wid":"w1"}'


def _certificate(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_tls_is_verified_against_the_trust_store(server, tmp_path, monkeypatch):
    cert, key = _certificate(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    s = server([OK, OK, OK], tls=context)
    url = f"https://localhost:{s.port}"
    with Client(url, retry=RetryPolicy(attempts=1)) as untrusted, pytest.raises(Unavailable):
        untrusted.beat("w1")  # a self-signed certificate the trust store does not know
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with Client(url) as client:
        assert client.beat("w1") == "quiet"
    from werk_client import AsyncClient

    async with AsyncClient(url) as aclient:
        assert await aclient.beat("w1") == "quiet"


async def test_connections_in_use_are_capped(server):
    s = server([])
    pool = AsyncPool(Origin.parse(s.url), 5.0, max_connections=2)
    answers = await asyncio.gather(*(pool.request(REQUEST, 5.0) for _ in range(10)))
    pool.close()
    assert [a.content for a in answers] == [BODY] * 10 and s.connections == 2
    blocking = SyncPool(Origin.parse(s.url), 5.0, max_connections=2)
    try:
        threads = [threading.Thread(target=blocking.request, args=(REQUEST, 5.0)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        blocking.close()
    assert len(s.requests) == 18 and s.connections <= 4
