"""Clients that connect and send nothing, or a request part-way, cannot hold the server's file
descriptors: each request's head and body have a deadline (WERK_HEADER_TIMEOUT,
WERK_BODY_TIMEOUT) and a process keeps at most WERK_MAX_CONNECTIONS open; normal traffic, long
polls and idle keep-alive connections are untouched. Against real `werk serve` processes."""

from __future__ import annotations

import asyncio
import http.client
import json
import resource
import subprocess
import sys
import time

import httpx
import pytest

from tests.support.helpers import count_jobs

TIMEOUT = 2.0
# Scheduling delay a loaded machine may add before a deadline's close reaches the client.
SLACK = 4.0

SILENT = 1000
HALF_HEAD = 50
HALF_BODY = 50
PUSHES = 100

PUSH_HEAD = (
    b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n"
)


def _allow_open_files(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (n if hard == resource.RLIM_INFINITY else min(n, hard), hard)
        )


class Slow:
    """A raw connection that sent ``data`` and then nothing more."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, opened: float
    ) -> None:
        self.reader, self.writer = reader, writer
        self.opened = opened

    @classmethod
    async def open(cls, port: int, data: bytes = b"") -> Slow:
        # Timed from before the connect: the server cannot have accepted it earlier, however
        # late this process gets to run once it is connected.
        opened = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        slow = cls(reader, writer, opened)
        if data:
            writer.write(data)
            await writer.drain()
        return slow

    async def until_closed(self, timeout: float) -> tuple[float, bytes]:
        """Seconds from opening to the server's close, and what it sent before it."""
        try:
            received = await asyncio.wait_for(self.reader.read(), timeout)
        except ConnectionResetError:
            received = b""
        return time.monotonic() - self.opened, received

    async def is_open_after(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self.reader.read(1), seconds)
        except TimeoutError:
            return True
        except ConnectionResetError:
            pass
        return False

    def close(self) -> None:
        self.writer.close()


def _timed_out(received: bytes) -> dict[str, object]:
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), received
    assert b"content-type: application/problem+json" in head.lower()
    problem: dict[str, object] = json.loads(body)
    assert problem["code"] == "request_timeout" and problem["status"] == 408
    return problem


async def test_slow_connections_are_closed_while_pushes_succeed(werk_server_factory, database_url):
    _allow_open_files(SILENT + HALF_HEAD + HALF_BODY + 500)
    server = werk_server_factory(
        env={
            "WERK_HEADER_TIMEOUT": str(TIMEOUT),
            "WERK_BODY_TIMEOUT": str(TIMEOUT),
            "WERK_MAX_CONNECTIONS": "3000",
        }
    )
    # Each connection's wait for its close starts as it opens (opening a thousand takes a while
    # on a loaded machine).
    slow: list[Slow] = []
    closing: list[asyncio.Task[tuple[float, bytes]]] = []

    async def open_slow(data: bytes = b"") -> None:
        conn = await Slow.open(server.port, data)
        slow.append(conn)
        closing.append(asyncio.create_task(conn.until_closed(TIMEOUT + SLACK)))

    for _ in range(SILENT):
        await open_slow()
    for _ in range(HALF_HEAD):
        await open_slow(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConte")
    for _ in range(HALF_BODY):
        await open_slow(PUSH_HEAD + b'{"jobtype": "half"')
    try:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=10)) as http:
            answers = await asyncio.gather(
                *(
                    http.post(server.url + "/v1/jobs", json={"jobtype": "normal", "args": [i]})
                    for i in range(PUSHES)
                )
            )
        closed = await asyncio.gather(*closing)
    finally:
        for conn in slow:
            conn.close()

    assert [a.status_code for a in answers] == [201] * PUSHES
    # Each slow connection was closed by its deadline, not before and not much after it.
    outside = sorted(s for s, _ in closed if not TIMEOUT * 0.9 <= s <= TIMEOUT + SLACK)
    assert not outside, (
        f"{len(outside)} closed outside the deadline: {outside[:5]} ... {outside[-5:]}"
    )
    assert {received for _, received in closed[:SILENT]} == {b""}
    for _, received in closed[SILENT : SILENT + HALF_HEAD]:
        assert "head" in str(_timed_out(received)["detail"])
    for _, received in closed[SILENT + HALF_HEAD :]:
        assert "WERK_BODY_TIMEOUT" in str(_timed_out(received)["detail"])
    # The pushes cut short stored nothing.
    assert await count_jobs(database_url) == PUSHES


async def test_connections_beyond_the_cap_are_closed_while_the_server_keeps_serving(
    werk_server_factory, database_url
):
    cap = 50
    server = werk_server_factory(env={"WERK_MAX_CONNECTIONS": str(cap)})
    await asyncio.sleep(0.5)  # the readiness probe's connection is gone
    held = [await Slow.open(server.port) for _ in range(cap)]
    beyond = [await Slow.open(server.port) for _ in range(10)]
    try:
        closed = await asyncio.gather(*(s.until_closed(2) for s in beyond))
        assert all(received == b"" for _, received in closed)
        assert all(await asyncio.gather(*(s.is_open_after(1) for s in held)))

        for s in held[:5]:  # room for a client again
            s.close()
        async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_connections=2)) as http:
            for _ in range(50):
                try:
                    await http.get(server.url + "/livez")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            answers = [
                await http.post(server.url + "/v1/jobs", json={"jobtype": "after", "args": [i]})
                for i in range(20)
            ]
    finally:
        for s in held + beyond:
            s.close()
    assert [a.status_code for a in answers] == [201] * 20
    assert await count_jobs(database_url) == 20
    assert "WERK_MAX_CONNECTIONS" in server.log_path.read_text()


def _livez_twice_on_one_connection(port: int, idle: float) -> tuple[int, int, bool]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/livez")
        first = conn.getresponse()
        first.read()
        sock = conn.sock
        time.sleep(idle)
        conn.request("GET", "/livez")
        second = conn.getresponse()
        second.read()
        return first.status, second.status, conn.sock is sock
    finally:
        conn.close()


async def test_long_polls_and_idle_keep_alive_outlast_the_read_deadlines(werk_server_factory):
    server = werk_server_factory(env={"WERK_HEADER_TIMEOUT": "1", "WERK_BODY_TIMEOUT": "1"})
    fetch = {"queues": ["default"], "wid": "w1", "count": 1}
    async with httpx.AsyncClient(timeout=30) as http:
        started = time.monotonic()
        empty = await http.post(server.url + "/v1/fetch", json={**fetch, "wait": 3})
        waited = time.monotonic() - started
        polling = asyncio.create_task(
            http.post(server.url + "/v1/fetch", json={**fetch, "wait": 10})
        )
        await asyncio.sleep(2.5)
        pushed = await http.post(
            server.url + "/v1/jobs", json={"jobtype": "late", "jid": "late-job-1"}
        )
        delivered = await polling
    assert empty.status_code == 200 and empty.json() == {"jobs": []} and waited >= 2.5
    assert pushed.status_code == 201
    assert delivered.status_code == 200
    assert [j["jid"] for j in delivered.json()["jobs"]] == ["late-job-1"]

    # An idle keep-alive connection is governed by the keep-alive time (75 s), not the head's
    # deadline: the second request goes over the same socket.
    first, second, same = await asyncio.to_thread(_livez_twice_on_one_connection, server.port, 2.5)
    assert (first, second, same) == (200, 200, True)


RAISE_LIMIT = """
import logging, resource, sys
from werk.config import Settings
from werk.connections import ensure_file_limit
logging.basicConfig(stream=sys.stdout, format="%(message)s")
soft, hard = (int(n) for n in sys.argv[1:])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
ensure_file_limit(Settings(max_connections=3000, faktory_port=7419, faktory_max_connections=500))
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def _limit_after_start(soft: int, hard: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", RAISE_LIMIT, str(soft), str(hard)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def test_the_open_file_limit_is_raised_to_fit_the_caps():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 5000:
        pytest.skip(f"the hard open-file limit ({hard}) leaves no room to raise")
    # 3,000 HTTP + 500 FWP connections, the pools and a reserve.
    [raised] = _limit_after_start(256, 5000)
    assert 3500 < int(raised) < 5000
    *warning, kept = _limit_after_start(256, 1024)
    assert int(kept) == 1024
    assert "WERK_MAX_CONNECTIONS" in "".join(warning)
