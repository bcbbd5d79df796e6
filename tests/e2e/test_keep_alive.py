"""A connection a client keeps in its pool is still open when the client reuses it. With
uvicorn's default keep-alive (5 s, the same as httpx's pool expiry) a request sent as the server
closed the idle connection went unanswered: an httpx.ReadError in
test_two_servers_many_fetchers_deliver_each_job_once on a slow machine."""

from __future__ import annotations

import asyncio

IDLE_SECONDS = 6  # longer than httpx's keepalive_expiry and uvicorn's default keep-alive, 5 s

REQUEST = b"GET /livez HTTP/1.1\r\nHost: werk\r\n\r\n"


async def _answer(reader: asyncio.StreamReader) -> bytes:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await asyncio.wait_for(reader.readexactly(length), timeout=10)
    return head


async def test_an_idle_connection_outlasts_the_clients_pool_expiry(werk_server):
    reader, writer = await asyncio.open_connection("127.0.0.1", werk_server.port)
    try:
        writer.write(REQUEST)
        assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
        await asyncio.sleep(IDLE_SECONDS)
        writer.write(REQUEST)
        assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
    finally:
        writer.close()
