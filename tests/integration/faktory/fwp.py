"""A raw FWP client for protocol tests: sends lines, parses RESP replies. Deliberately small and
independent of the server's code, so the tests check the wire, not the implementation."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import struct
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    kind: str  # "+", "-", "$"
    text: str | None  # simple/error text, bulk body (None = nil)

    @property
    def json(self) -> Any:
        assert self.kind == "$" and self.text is not None, self
        return json.loads(self.text)

    def __str__(self) -> str:
        return f"{self.kind}{self.text}"


def pwdhash(password: str, salt: str, iterations: int) -> str:
    digest = hashlib.sha256((password + salt).encode()).digest()
    for _ in range(iterations - 1):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()


class Fwp:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.greeting: dict[str, Any] = {}

    @classmethod
    async def open(cls, port: int) -> Fwp:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    @classmethod
    async def connect(
        cls,
        port: int,
        *,
        wid: str | None = None,
        password: str | None = None,
        v: int | None = 2,
        **hello: Any,
    ) -> Fwp:
        """Connect and complete the handshake (asserting +OK)."""
        conn = await cls.open(port)
        reply = await conn.handshake(wid=wid, password=password, v=v, **hello)
        assert reply.kind == "+" and reply.text == "OK", reply
        return conn

    async def handshake(
        self,
        *,
        wid: str | None = None,
        password: str | None = None,
        v: int | None = 2,
        **extra: Any,
    ) -> Reply:
        hi = await self.read()
        assert hi.kind == "+" and hi.text is not None and hi.text.startswith("HI "), hi
        self.greeting = json.loads(hi.text[3:])
        hello: dict[str, Any] = {"hostname": "test", "pid": 1, "labels": ["t"]}
        if v is not None:
            hello["v"] = v
        if wid is not None:
            hello["wid"] = wid
        if password is not None and "s" in self.greeting:
            iterations = self.greeting.get("i", 1) if (v or 0) >= 2 else 1
            hello["pwdhash"] = pwdhash(password, self.greeting["s"], iterations)
        hello.update(extra)
        return await self.call("HELLO " + json.dumps(hello))

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def call(self, line: str, timeout: float = 10) -> Reply:
        await self.send_raw(line.encode() + b"\r\n")
        return await self.read(timeout)

    async def cmd(self, verb: str, payload: Any = None, timeout: float = 10) -> Reply:
        line = verb if payload is None else f"{verb} {json.dumps(payload)}"
        return await self.call(line, timeout)

    async def read(self, timeout: float = 10) -> Reply:
        line = await asyncio.wait_for(self.reader.readuntil(b"\r\n"), timeout)
        line = line[:-2]
        kind, rest = chr(line[0]), line[1:].decode()
        if kind in "+-":
            return Reply(kind, rest)
        assert kind == "$", line
        size = int(rest)
        if size < 0:
            return Reply("$", None)
        body = await asyncio.wait_for(self.reader.readexactly(size + 2), timeout)
        return Reply("$", body[:-2].decode())

    async def closed(self, timeout: float = 5) -> bool:
        """True when the server closed the connection (EOF) within the timeout."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), timeout)
        except (TimeoutError, ConnectionError):
            return False
        return data == b""

    def reset(self) -> None:
        """Drop the connection with a reset (RST), as a crashed client or a middlebox does,
        instead of closing it (FIN)."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def job(
    jid: str, jobtype: str = "t", args: list[Any] | None = None, **fields: Any
) -> dict[str, Any]:
    return {"jid": jid, "jobtype": jobtype, "args": args if args is not None else [], **fields}
