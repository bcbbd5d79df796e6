"""What the HTTP layer refuses before any route reads it is answered as every refusal is, with
problem+json and a stable code, after the requests read before it on the connection, which is
then closed: a request the parser cannot read (400 malformed_request), and a request line and
headers over WERK_MAX_HEADER_BYTES (431 header_too_large), whether the head comes whole or a
piece at a time, however long it would grow. Pipelined requests are read a bounded number
ahead; the connection closes once those are answered, and each push answered is stored, the
rest are not. Against real `werk serve` processes."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.support.helpers import count_jobs

LIMIT = 4096
HOST = b"Host: 127.0.0.1\r\n"


async def _exchange(port: int, pieces: list[bytes], wait: float = 10) -> bytes:
    """Sends ``pieces`` one write each, a moment apart, and reads until the server closes (a
    refusal closes the connection: nothing may be written after the piece it refuses)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.05)
        return await asyncio.wait_for(reader.read(), timeout=wait)
    finally:
        writer.close()


def _problem(received: bytes, status: int, code: str) -> dict[str, object]:
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), received[:200]
    fields = head.lower().split(b"\r\n")
    assert b"content-type: application/problem+json" in fields
    assert b"connection: close" in fields
    problem: dict[str, object] = json.loads(body)
    assert problem["code"] == code and problem["status"] == status
    return problem


async def test_requests_the_parser_cannot_read_get_a_problem_and_store_nothing(
    werk_server, database_url
):
    malformed = [
        b"GET /livez HTTP/1.1\r\n" + HOST + b"No colon here\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
        # A push whose chunked body has a size that is no number.
        b"POST /v1/jobs HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    ]
    for request in malformed:
        problem = _problem(await _exchange(werk_server.port, [request]), 400, "malformed_request")
        assert "could not parse" in str(problem["detail"])

    assert await count_jobs(database_url) == 0
    async with httpx.AsyncClient(base_url=werk_server.url) as http:
        pushed = await http.post("/v1/jobs", json={"jobtype": "after", "args": []})
    assert pushed.status_code == 201


async def test_a_head_over_max_header_bytes_gets_431_whole_or_in_pieces(
    werk_server_factory, database_url
):
    server = werk_server_factory(env={"WERK_MAX_HEADER_BYTES": str(LIMIT)})
    push_line = b"POST /v1/jobs HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    body = b'{"jobtype": "big-head", "args": []}'
    length = b"Content-Length: %d\r\n" % len(body)

    # Whole, in one write with its body.
    whole = push_line + length + b"X-Pad: " + b"a" * LIMIT + b"\r\n\r\n" + body
    problem = _problem(await _exchange(server.port, [whole]), 431, "header_too_large")
    assert str(LIMIT) in str(problem["detail"])

    # A piece at a time, no piece over the limit, until the head is over it.
    pieces = [push_line + length]
    while sum(map(len, pieces)) <= LIMIT:
        pieces.append(b"X-Pad-%d: %s\r\n" % (len(pieces), b"a" * 1000))
    _problem(await _exchange(server.port, pieces), 431, "header_too_large")

    # The second request of a kept-alive connection, the first answered as usual.
    first = b"GET /livez HTTP/1.1\r\n" + HOST + b"\r\n"
    second = b"GET /livez HTTP/1.1\r\n" + HOST + b"X-Pad: " + b"a" * 2000
    received = await _exchange(server.port, [first, second, b"a" * 2500])
    assert received.startswith(b"HTTP/1.1 200 "), received[:200]
    _problem(received[received.index(b"HTTP/1.1 431 ") :], 431, "header_too_large")

    # A header that never ends is cut off near the limit, not read on: the server closes the
    # connection long before 64 MB are sent.
    _, writer = await asyncio.open_connection("127.0.0.1", server.port)
    sent = 0
    try:
        writer.write(push_line + b"X-Endless: ")
        while sent < 64 << 20:
            writer.write(b"a" * 65536)
            await asyncio.wait_for(writer.drain(), timeout=10)
            sent += 65536
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        writer.close()
    assert sent < 64 << 20

    # Just under the limit is a request like any other.
    async with httpx.AsyncClient(base_url=server.url) as http:
        under = await http.post(
            "/v1/jobs",
            json={"jobtype": "under", "args": []},
            headers={"X-Pad": "a" * (LIMIT - 400)},
        )
    assert under.status_code == 201, under.text
    assert await count_jobs(database_url) == 1


async def test_pipelined_requests_are_read_a_bounded_number_ahead(werk_server, database_url):
    body = b'{"jobtype": "pipelined", "args": []}'
    push = (
        b"POST /v1/jobs HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    received = await _exchange(werk_server.port, [push * 300])
    answers = received.split(b"HTTP/1.1 ")[1:]
    assert 0 < len(answers) < 300
    assert all(a.startswith(b"201 ") for a in answers), received[:300]
    # Each answered push is stored, and only those: the rest were never read.
    assert await count_jobs(database_url) == len(answers)


async def test_a_refusal_waits_for_the_answers_before_it(werk_server_factory):
    # A long poll outlasting the head deadline, then a head over the limit on the same
    # connection: the poll is answered, then the refusal, then the connection closes.
    server = werk_server_factory(
        env={"WERK_MAX_HEADER_BYTES": str(LIMIT), "WERK_HEADER_TIMEOUT": "1"}
    )
    poll = b'{"queues": ["empty"], "wid": "w1", "wait": 2.5}'
    fetch = (
        b"POST /v1/fetch HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(poll), poll)
    )
    oversized = b"GET /livez HTTP/1.1\r\n" + HOST + b"X-Pad: " + b"a" * LIMIT + b"\r\n\r\n"
    received = await _exchange(server.port, [fetch + oversized], wait=15)
    assert received.startswith(b"HTTP/1.1 200 "), received[:300]
    fetched, _, refusal = received.partition(b"HTTP/1.1 431 ")
    assert json.loads(fetched.partition(b"\r\n\r\n")[2])["jobs"] == []
    _problem(b"HTTP/1.1 431 " + refusal, 431, "header_too_large")
