"""A pooled connection kept by one sequential writer.

A batching writer runs one statement at a time, usually right after a request arrives. Taking
a connection from asyncpg's pool and giving it back costs more than the round trip of a small
statement, and on the latency path (a push answering a waiting fetch) that would be paid on
every job."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

R = TypeVar("R")


class HeldConnection:
    """Acquired on first use and kept; handed back to the pool after any error (so a lost or
    half-used connection is replaced) and on ``close``. Not for concurrent use."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._conn: Any = None

    async def _run(self, call: Callable[[Any], Awaitable[R]]) -> R:
        if self._conn is None:
            self._conn = await self._pool.acquire()
        conn = self._conn
        try:
            return await call(conn)
        except BaseException:
            self._conn = None
            await self._pool.release(conn)
            raise

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        return await self._run(lambda c: c.fetch(query, *args))

    async def fetchrow(self, query: str, *args: Any) -> Any:
        return await self._run(lambda c: c.fetchrow(query, *args))

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self._run(lambda c: c.fetchval(query, *args))

    async def execute(self, query: str, *args: Any) -> str:
        return await self._run(lambda c: c.execute(query, *args))

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await self._pool.release(conn)
