"""A lean HTTP/1.1 keep-alive client for load generation.

One ``Connection`` is one TCP connection with one request in flight at a time (no pipelining),
written on asyncio.Protocol so that a request costs a few microseconds of client CPU: no header
objects, no URL parsing, no response decoding unless the caller asks. It understands exactly what
uvicorn sends back: a status line, headers, and a body framed by Content-Length (or chunked, or
none for 204/304).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson


class HTTPError(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:300]!r}")
        self.status = status
        self.body = body


class _Protocol(asyncio.Protocol):
    __slots__ = ("_buf", "_closed", "_waiter", "transport")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.transport: asyncio.Transport | None = None
        self._closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc or ConnectionError("connection closed by server"))

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._waiter is not None:
            self._try_parse()

    def _try_parse(self) -> None:
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(buf[:end])
        status = int(head[9:12])
        length = -1
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            lname = name.strip().lower()
            if lname == b"content-length":
                length = int(value)
            elif lname == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        start = end + 4
        if chunked:
            body = bytearray()
            pos = start
            while True:
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    return
                size = int(bytes(buf[pos:nl]).split(b";")[0], 16)
                if len(buf) < nl + 2 + size + 2:
                    return
                body += buf[nl + 2 : nl + 2 + size]
                pos = nl + 2 + size + 2
                if size == 0:
                    break
            del buf[:pos]
            result = bytes(body)
        else:
            if length < 0:
                length = 0  # 204/304 or an empty response
            if len(buf) < start + length:
                return
            result = bytes(buf[start : start + length])
            del buf[: start + length]
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((status, result))


class Connection:
    """One keep-alive connection; ``request`` returns (status, body bytes)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._proto: _Protocol | None = None
        self._hostline = f"Host: {host}:{port}\r\n".encode()

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(_Protocol, self.host, self.port)
        self._proto = proto

    async def request(
        self, method: str, path: str, body: bytes | None = None, headers: bytes = b""
    ) -> tuple[int, bytes]:
        """``headers``: extra header lines, each ending in CRLF."""
        if self._proto is None or self._proto._closed:
            await self.connect()
        proto = self._proto
        assert proto is not None and proto.transport is not None
        if body is None:
            head = f"{method} {path} HTTP/1.1\r\n".encode() + self._hostline + b"\r\n"
            data = head
        else:
            head = (
                f"{method} {path} HTTP/1.1\r\n".encode()
                + self._hostline
                + headers
                + b"Content-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n\r\n"
            )
            data = head + body
        fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        proto._waiter = fut
        proto.transport.write(data)
        if proto._buf:
            proto._try_parse()
        return await fut

    async def post_json(
        self, path: str, payload: Any, expect: tuple[int, ...] = (200, 201, 204)
    ) -> bytes:
        status, body = await self.request("POST", path, orjson.dumps(payload))
        if status not in expect:
            raise HTTPError(status, body)
        return body

    async def post_raw(
        self,
        path: str,
        body: bytes,
        expect: tuple[int, ...] = (200, 201, 204),
        headers: bytes = b"",
    ) -> bytes:
        status, resp = await self.request("POST", path, body, headers)
        if status not in expect:
            raise HTTPError(status, resp)
        return resp

    def close(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
        self._proto = None


async def open_connections(host: str, port: int, n: int) -> list[Connection]:
    conns = [Connection(host, port) for _ in range(n)]
    # Open in modest waves so a thousand connects do not overflow the listen backlog.
    for i in range(0, n, 100):
        await asyncio.gather(*(c.connect() for c in conns[i : i + 100]))
    return conns
