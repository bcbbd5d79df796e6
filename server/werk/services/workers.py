"""Worker processes: registration and heartbeats."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from werk.db import queries
from werk.domain.clock import Clock
from werk.domain.job import WorkerState


class WorkerService:
    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    async def beat(
        self,
        wid: str,
        *,
        hostname: str = "",
        pid: int | None = None,
        labels: Sequence[str] = (),
        rss_kb: int | None = None,
        current_state: str | None = None,
    ) -> WorkerState:
        """Records the beat and answers what the worker should do (an operator may have asked it
        to quiet or terminate; a worker declared gone must terminate)."""
        state = await queries.beat_worker(
            self._pool,
            self._clock.now(),
            wid=wid,
            hostname=hostname,
            pid=pid,
            labels=labels,
            rss_kb=rss_kb,
            reported_state=current_state,
        )
        return WorkerState(state)
