"""Reading a job's result: at once, or waiting (long polling) until the job settles."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import asyncpg

from werk.db import queries
from werk.domain.job import is_settled
from werk.errors import JobNotFound
from werk.services.wakeup import WakeHub

Row = Mapping[str, Any]


class ResultService:
    def __init__(self, pool: asyncpg.Pool, hub: WakeHub) -> None:
        self._pool = pool
        self._hub = hub

    async def wait(self, jid: str, wait: float, gone: asyncio.Future[None] | None = None) -> Row:
        """The job, once settled (completed, dead, expired, ...) or when ``wait`` seconds pass
        or its client leaves (``gone``), whichever comes first. No connection is held while
        waiting: each look is one short read, and the hub says when to look again. Raises
        JobNotFound when no such job is stored, also when it goes while waited for (completed
        without keeping its result, or deleted)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            # Watched before the read, so a settlement between the two still wakes us.
            woken = self._hub.watch_result(jid) if wait > 0 else None
            try:
                row: Row | None = await queries.get_job(self._pool, jid)
                if row is None:
                    raise JobNotFound(
                        f"no job with jid {jid!r} is stored (a job is deleted at ack unless "
                        "pushed with keep_result_for)"
                    )
                remaining = deadline - loop.time()
                if woken is None or is_settled(row["state"]) or remaining <= 0:
                    return row
                if gone is not None and gone.done():
                    return row
                await _first(woken, gone, remaining)
                if self._hub.closed or (gone is not None and gone.done()):
                    return row
            finally:
                if woken is not None:
                    self._hub.unwatch_result(jid, woken)


async def _first(
    woken: asyncio.Future[None], gone: asyncio.Future[None] | None, seconds: float
) -> None:
    """Until ``woken`` or ``gone`` completes, or ``seconds`` pass."""
    waits: set[asyncio.Future[Any]] = {woken}
    if gone is not None:
        waits.add(gone)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
