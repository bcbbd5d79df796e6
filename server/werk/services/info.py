"""The server's summary (Faktory's INFO)."""

from __future__ import annotations

import time
from typing import Any

import asyncpg

from werk import __version__
from werk.db import queries
from werk.domain.clock import Clock


class InfoService:
    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock
        self._started = time.monotonic()

    async def info(self) -> dict[str, Any]:
        row = await queries.info(self._pool, self._clock.now())
        return {
            "server": {
                "version": __version__,
                "uptime_seconds": round(time.monotonic() - self._started, 3),
                "now": row["now"],
            },
            "totals": {
                "processed": row["processed"],
                "failed": row["failed"],
                "enqueued": row["pushed"],
            },
            "states": row["states"],
            "queues": row["queues"],
            "workers": row["workers"],
        }

    async def ping(self) -> None:
        await queries.ping(self._pool)
