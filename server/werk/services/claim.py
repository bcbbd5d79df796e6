"""Claiming jobs for workers: fetch, long polling, and handing back jobs a fetch could not
deliver."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from werk.db import queries
from werk.domain.clock import Clock
from werk.services.dependency_reads import AnswerBudget, with_dependencies
from werk.services.wakeup import WakeHub, counts_by_queue
from werk.services.writers import Claim, ClaimWriter

Row = Mapping[str, Any]

# Statements a hand-back may take when pushes of its jobs' unique keys race it.
RELOCK_ATTEMPTS = 3


class ClaimService:
    def __init__(
        self, pool: asyncpg.Pool, clock: Clock, hub: WakeHub, *, dependencies: AnswerBudget
    ) -> None:
        self._pool = pool
        self._dependencies = dependencies
        self._hub = hub
        self._claims = ClaimWriter(pool, clock)

    async def close(self) -> None:
        """Give the held connection back (before the pool closes)."""
        await self._claims.close()

    async def fetch(
        self,
        queues: Sequence[str],
        wid: str,
        count: int,
        wait: float,
        gone: asyncio.Future[None] | None = None,
    ) -> list[Row]:
        """Claim up to ``count`` jobs; with ``wait`` > 0, long-poll until one arrives.

        ``gone`` completes when the requesting client disconnects: the long poll ends at once,
        and jobs reserved for it by then are handed back, so no job waits out a lease nobody
        holds.
        """
        rows = await self._fetch(queues, wid, count, wait, gone)
        if rows and gone is not None and gone.done():
            await self.hand_back(rows)
            return []
        return await with_dependencies(self._pool, rows, self._dependencies)

    async def _fetch(
        self,
        queues: Sequence[str],
        wid: str,
        count: int,
        wait: float,
        gone: asyncio.Future[None] | None,
    ) -> list[Row]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            # Register before claiming, so a push landing between the claim and the wait still
            # wakes us.
            waiter = self._hub.register(queues, wid, count) if wait > 0 else None
            try:
                rows = await self._claims.submit(Claim(tuple(queues), wid, count))
                if rows:
                    if len(rows) == count:  # there may be more: let another waiter look
                        for q in {r["queue"] for r in rows}:
                            self._hub.wake(q, 1)
                    return _in_claim_order(rows, queues)
                remaining = deadline - loop.time()
                if waiter is None or remaining <= 0 or self._hub.closed:
                    return []
                handed = await self._hub.wait(waiter, remaining, gone)  # at once if gone
                if handed:  # a push stored jobs reserved for us
                    return _in_claim_order(handed, queues)
                if self._hub.closed or (gone is not None and gone.done()):
                    return []
            finally:
                if waiter is not None:
                    self._hub.unregister(waiter)

    async def hand_back(self, rows: Sequence[Row]) -> None:
        """Jobs fetched but not delivered (the client left) become available again, in their
        old place, as if never fetched."""
        jids, leases = [r["jid"] for r in rows], [r["lease"] for r in rows]
        # A job locked unique until start takes its key back. A push that took the key after
        # the statement looked fails it (nothing changed); written again, it sees that push,
        # and the last attempt takes no key back, so the jobs are never left reserved.
        for attempt in range(RELOCK_ATTEMPTS, 0, -1):
            try:
                queues = await queries.unclaim_jobs(self._pool, jids, leases, relock=attempt > 1)
                break
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name != "werk_jobs_unique_idx" or attempt == 1:
                    raise
        self._hub.jobs_arrived(counts_by_queue(queues))


def _in_claim_order(rows: list[Row], queues: Sequence[str]) -> list[Row]:
    """Queues in the order asked, then highest priority, then oldest."""
    order = {q: i for i, q in enumerate(queues)}
    rows.sort(key=lambda r: (order[r["queue"]], -r["priority"], r["seq"]))
    return rows
