"""Background upkeep every node runs: release orphaned leases, promote due jobs, expire jobs
not started in time, prune, keep the job table from bloating and, with WERK_SEARCH_AVAILABLE,
the search index over available jobs in place.

Each pass is a bounded, set-based statement with SKIP LOCKED, so any number of nodes can run it at
once without handling a job twice; no leader election is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from werk.config import Settings
from werk.db import batch_queries, queries, sessions
from werk.domain.clock import Clock
from werk.services.search_index import SearchIndexBuild
from werk.services.wakeup import WakeHub, counts_by_queue

log = logging.getLogger(__name__)

BATCH = 1000
# Pruning scans more than the other steps and is not urgent: once every this many passes.
PRUNE_EVERY = 30
GONE_WORKER_RETENTION = 86400.0


class VacuumPolicy:
    """What a VACUUM pass of the job table does: ``whole`` (heap and every index), ``heap``
    (the heap only) or ``skip`` (nothing).

    A whole pass reads every index in full, and kept jobs sit in most of them; a heap-only
    pass reads the pages that changed or still hold dead line pointers. So a pass is whole once
    the rows changed (updated out of place or deleted: each leaves index entries only a whole
    pass clears) since the last whole one reach ``threshold + scale * rows``: the whole passes
    then come less often the more rows the table holds, and their cost per job stays the same,
    while the dead index entries and line pointers between them stay a bounded fraction of the
    table. A pass that finds nothing changed since the pass before is whole if a heap-only pass
    left something for the indexes (so an idle table ends up clean), else skipped. The first
    pass is whole, and so is one after PostgreSQL's statistics were reset (the counter went
    back)."""

    def __init__(self, threshold: int, scale: float) -> None:
        self._threshold = threshold
        self._scale = scale
        self._whole_at: int | None = None
        self._last: int | None = None

    def plan(self, changed: int, rows: float) -> queries.VacuumPass:
        if self._whole_at is None or self._last is None or changed < self._last:
            return "whole"
        if changed == self._last:
            return "whole" if changed > self._whole_at else "skip"
        if changed - self._whole_at >= self._threshold + self._scale * rows:
            return "whole"
        return "heap"

    def vacuumed(self, changed: int, done: queries.VacuumPass) -> None:
        self._last = changed
        if done == "whole":
            self._whole_at = changed


class Maintenance:
    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        hub: WakeHub,
        settings: Settings,
        search_index: SearchIndexBuild | None = None,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._hub = hub
        self._settings = settings
        self._search_index = search_index
        self._task: asyncio.Task[None] | None = None
        self.vacuum_policy = VacuumPolicy(
            settings.vacuum_index_threshold, settings.vacuum_index_scale
        )

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="werk-maintenance")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def run_once(self) -> dict[str, int]:
        """One full pass; returns how many jobs each step touched."""
        released = await self.release_orphans()
        expired = await self.expire_due()
        promoted = await self.promote_due()
        pruned = await self.prune()
        return {"released": released, "expired": expired, "promoted": promoted, "pruned": pruned}

    async def prune(self) -> int:
        """Apply dead-job and completed-job retention, a bounded batch per statement; delete
        finished batches whose members are all gone, after the dead-job retention; forget gone
        workers and expired dashboard sessions."""
        total = 0
        while True:
            n = await queries.prune_finished(
                self._pool,
                self._clock.now(),
                dead_retention=self._settings.dead_retention_days * 86400,
                dead_max=self._settings.dead_max,
                completed_retention=self._settings.completed_retention,
                limit=BATCH,
            )
            total += n
            if n < BATCH:
                break
        while (
            await batch_queries.prune_batches(
                self._pool,
                self._clock.now(),
                older_than=self._settings.dead_retention_days * 86400,
                limit=BATCH,
            )
            == BATCH
        ):
            pass
        await queries.prune_gone_workers(
            self._pool, self._clock.now(), older_than=GONE_WORKER_RETENTION
        )
        await sessions.prune_sessions(self._pool, self._clock.now())
        return total

    async def expire_due(self) -> int:
        """Move jobs whose expires_at has come, still waiting, to expired (before promotion, so
        no such job is made available first)."""
        total = 0
        while True:
            jids = await queries.expire_due(self._pool, self._clock.now(), BATCH)
            self._hub.jobs_settled((), readable=jids)
            total += len(jids)
            if len(jids) < BATCH:
                return total

    async def promote_due(self) -> int:
        total = 0
        while True:
            queues = await queries.promote_due(self._pool, self._clock.now(), BATCH)
            self._hub.jobs_arrived(counts_by_queue(queues))
            total += len(queues)
            if len(queues) < BATCH:
                return total

    async def release_orphans(self) -> int:
        total = 0
        while True:
            rows = await queries.release_orphans(
                self._pool,
                self._clock.now(),
                max_orphans=self._settings.max_orphans,
                worker_timeout=self._settings.worker_timeout,
                limit=BATCH,
            )
            # Dead or discarded: their result waiters, here and on the other nodes, look again.
            self._hub.jobs_settled((), readable=[r["jid"] for r in rows if r["outcome"] != "retry"])
            for row in rows:
                if row["poisoned"]:
                    log.warning(
                        "job %s (queue %s) is dead: orphaned %d times (poison pill)",
                        row["jid"],
                        row["queue"],
                        self._settings.max_orphans,
                    )
            total += len(rows)
            if len(rows) < BATCH:
                return total

    async def vacuum(self) -> queries.VacuumPass | None:
        """Vacuum the job table (whole, its heap or not at all, as the policy says) and
        werk_settlings; returns what the pass did, None when another node was vacuuming."""
        done = await queries.vacuum_jobs(
            self._pool, plan=self.vacuum_policy.plan, pooled=self._settings.pooled
        )
        if done is None:
            return None
        changed, what = done
        self.vacuum_policy.vacuumed(changed, what)
        return what

    async def _run(self) -> None:
        passes = 0
        loop = asyncio.get_running_loop()
        vacuumed = checked = loop.time()
        while True:
            steps: list[Callable[[], Awaitable[object]]] = [
                self.release_orphans,
                self.expire_due,
                self.promote_due,
            ]
            if passes % PRUNE_EVERY == 0:
                steps.append(self.prune)
            passes += 1
            interval = self._settings.vacuum_interval
            if interval > 0 and loop.time() - vacuumed >= interval:
                vacuumed = loop.time()
                steps.append(self.vacuum)
            every = self._settings.search_index_check_interval
            if self._search_index is not None and loop.time() - checked >= every:
                checked = loop.time()
                steps.append(self._check_search_index)
            # Each step on its own: one that fails (a row PostgreSQL refuses to write, a lock
            # timeout) leaves the others to run, so no job of another queue waits on it.
            for step in steps:
                try:
                    await step()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("maintenance step %s failed: %s", step.__name__, exc)
            await asyncio.sleep(self._settings.maintenance_interval)

    async def _check_search_index(self) -> None:
        if self._search_index is not None:
            await self._search_index.check(self._pool)
