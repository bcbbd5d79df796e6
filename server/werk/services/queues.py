"""Queues as operators see them: sizes, latency, pause/resume, clear."""

from __future__ import annotations

import re
import time

import asyncpg

from werk.db import admin_queries
from werk.db.admin_queries import QueueRow
from werk.domain.clock import Clock
from werk.domain.job import QUEUE_NAMES, QUEUE_PATTERN
from werk.errors import InvalidRequest
from werk.services.wakeup import WakeHub

_QUEUE_NAME = re.compile(QUEUE_PATTERN)

# Clearing deletes in batches of this many rows, each its own short statement.
CLEAR_BATCH = 10_000


def check_queue_name(name: str) -> str:
    if not _QUEUE_NAME.fullmatch(name):
        raise InvalidRequest(
            f"invalid queue name {name!r}: use {QUEUE_NAMES}",
            errors=[{"loc": "queue", "message": "does not match " + QUEUE_PATTERN}],
        )
    return name


class QueueService:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, hub: WakeHub) -> None:
        self._pool = pool
        self._clock = clock
        self._hub = hub
        self._cached: tuple[float, list[QueueRow]] | None = None

    async def list(self, *, max_age: float = 0.0) -> list[QueueRow]:
        """Every queue that has jobs or was paused/resumed, by name. Counting reads the whole
        jobs index, so readers that refresh often (the dashboard) may accept an answer up to
        ``max_age`` seconds old; actions on this node drop it."""
        cached = self._cached
        if cached is not None and time.monotonic() - cached[0] < max_age:
            return cached[1]
        rows = await admin_queries.list_queues(self._pool, self._clock.now())
        self._cached = (time.monotonic(), rows)
        return rows

    async def get(self, name: str) -> QueueRow:
        """One queue; a name never seen reads as an empty, unpaused queue."""
        check_queue_name(name)
        rows = await admin_queries.list_queues(self._pool, self._clock.now(), name)
        if rows:
            return rows[0]
        return QueueRow(name=name, size=0, latency_seconds=0.0, paused=False, counts={})

    async def latency(self, name: str) -> float:
        """Seconds the oldest available job of the queue has waited (0 when empty)."""
        return (await self.get(name)).latency_seconds

    async def pause(self, name: str) -> QueueRow:
        """The queue hands out nothing until resumed; pushes are still accepted."""
        await admin_queries.set_queue_paused(self._pool, check_queue_name(name), True)
        self._cached = None
        return await self.get(name)

    async def resume(self, name: str) -> QueueRow:
        await admin_queries.set_queue_paused(self._pool, check_queue_name(name), False)
        self._cached = None
        row = await self.get(name)
        if row.size:  # long-polling fetches on this queue (here and on other nodes) may run now
            self._hub.jobs_arrived({name: row.size})
        return row

    async def clear(self, name: str) -> int:
        """Delete the queue's available jobs; returns how many were deleted."""
        check_queue_name(name)
        total = 0
        while True:
            jids = await admin_queries.clear_queue(self._pool, name, CLEAR_BATCH)
            self._hub.jobs_settled((), readable=jids)
            n = len(jids)
            total += n
            self._cached = None
            if n < CLEAR_BATCH:
                return total
