"""The search index over available jobs (WERK_SEARCH_AVAILABLE, search_index_create.sql).

Every node started with the setting makes sure the index is there, in the background: the
first to take the builders' lock builds it while the others go on serving, and the job list and
the bulk actions read it once it is valid (admin_job_search.sql), the available jobs being
walked until then. A build is CONCURRENTLY, so it blocks no push, fetch or ack, however long it
takes on a backlog. An invalid index found under the lock was left by a build that stopped (its
session ended, releasing the lock): it is dropped and built again. Each node's upkeep looks again
now and then (WERK_SEARCH_INDEX_CHECK_INTERVAL) and builds the index again the same way when it
is missing or invalid, so that mending it needs no restart.

Turning the setting off builds nothing more but drops nothing: the index goes only when the
operator says so (``werk search-index --drop``), so that a node started with other settings, or
an older one in a rolling deployment, cannot take away what the others were told to keep; the
nodes still running with the setting build it again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Literal

import asyncpg

from werk.db import search_index
from werk.db.pool import connect
from werk.db.queries import Executor

log = logging.getLogger(__name__)

INDEX = "werk_jobs_available_words_idx"

Ensured = Literal["present", "built", "rebuilt", "busy"]
Dropped = Literal["dropped", "absent", "busy"]


async def ensure(conn: asyncpg.Connection) -> Ensured:
    """Build the index unless it is valid: ``present`` (nothing to do), ``built``, ``rebuilt``
    (an invalid one was dropped first) or ``busy`` (another session holds the lock: building)."""
    if not await search_index.try_lock(conn):
        return "busy"
    try:
        found = await search_index.state(conn)
        if found:
            return "present"
        if found is False:
            log.warning("%s is invalid (a build stopped before the end): building it again", INDEX)
            await search_index.drop(conn)
        log.info("building %s (WERK_SEARCH_AVAILABLE); jobs are served meanwhile", INDEX)
        started = time.monotonic()
        await search_index.create(conn)
        log.info("built %s in %.1f s", INDEX, time.monotonic() - started)
        return "built" if found is None else "rebuilt"
    finally:
        await search_index.unlock(conn)


async def drop(conn: asyncpg.Connection) -> Dropped:
    """Drop the index, unless a session is building it (``busy``)."""
    if not await search_index.try_lock(conn):
        return "busy"
    try:
        if await search_index.state(conn) is None:
            return "absent"
        await search_index.drop(conn)
        return "dropped"
    finally:
        await search_index.unlock(conn)


class SearchIndexBuild:
    """``ensure`` in the background, on a connection of its own (a build outlasts any pool
    checkout): once after start-up, so that the server is ready before the index is, and again
    whenever ``check`` finds the index missing or invalid."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run ``ensure`` unless this node's is still running."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="werk-search-index")

    async def check(self, db: Executor) -> None:
        """Start ``ensure`` again when the index is missing (dropped while the node runs) or
        invalid (its build stopped); the node's upkeep calls this now and then. While another
        node builds it, that node holds the lock and this one's ensure finds it busy."""
        if await search_index.state(db) is not True:
            self.start()

    async def close(self) -> None:
        """Stop a build in progress: PostgreSQL cancels it, and the index left invalid is built
        again by the next node to find it so."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        try:
            conn = await connect(self._dsn, "werk-search-index")
        except (OSError, asyncpg.PostgresError) as exc:
            log.error("search index over available jobs not checked: %s", exc)
            return
        try:
            done: Ensured | None = await ensure(conn)
        except asyncpg.PostgresError as exc:
            log.error(
                "%s not built: %s; searches walk the available jobs until a node with "
                "WERK_SEARCH_AVAILABLE builds it",
                INDEX,
                exc,
            )
            done = None
        except BaseException:
            conn.terminate()  # cancelled: the session ends, its build and lock with it
            raise
        await conn.close()
        if done == "busy":
            log.info("%s: another node is building it", INDEX)
