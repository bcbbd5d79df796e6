"""Batches: opening one with its callbacks, opening it again, committing it, and reading how it
stands. Members join by their push (PushService); how they settle the schema counts
(0014_batches.sql)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from werk.db import batch_queries
from werk.db.queries import Executor
from werk.domain.batches import CALLBACK_KINDS, MAX_DEPTH, new_bid
from werk.domain.bodies import CallbackJob
from werk.domain.clock import Clock
from werk.domain.jids import new_jid
from werk.domain.job import NewJob
from werk.errors import (
    BatchCommitted,
    BatchFinished,
    BatchNotFound,
    InvalidRequest,
    WerkError,
)

Row = Mapping[str, Any]

# The fields of a push a callback may not carry: it waits for its batch, not for a time, a
# dependency, a key or another batch.
_NOT_FOR_CALLBACKS = ("at", "unique", "depends_on", "batch", "expires_at", "expires_in", "ref")


class BatchService:
    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock

    async def new(
        self,
        description: str | None,
        parent: str | None,
        callbacks: Mapping[str, CallbackJob],
    ) -> Row:
        """Open a batch (a member of ``parent``, which must be open), with a callback job per
        kind given (complete, success, death), each stored waiting for its condition."""
        jobs = [(kind, _callback_job(kind, spec)) for kind, spec in callbacks.items()]
        bid = new_bid()
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                if parent is not None:
                    depth = await batch_queries.batch_depth(conn, parent, MAX_DEPTH)
                    if depth is not None and depth >= MAX_DEPTH:
                        raise InvalidRequest(
                            f"batches nest at most {MAX_DEPTH} deep",
                            errors=[{"loc": "parent", "message": f"at depth {depth}"}],
                        )
                    if await batch_queries.join_batch(conn, parent) is None:
                        raise await batch_closed(conn, parent)
                await batch_queries.new_batch(
                    conn, self._clock.now(), bid, description, parent, jobs
                )
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name != "werk_jobs_pkey":
                raise
            raise InvalidRequest(
                "a callback's jid names a stored job",
                errors=[{"loc": "callbacks", "message": "jid exists"}],
            ) from exc
        return await self.get(bid)

    async def open(self, bid: str) -> Row:
        """Open the batch again so members may join (refused once it has finished)."""
        if await batch_queries.open_batch(self._pool, bid) is None:
            row = await self.get(bid)
            raise BatchFinished(f"batch {bid} finished at {row['completed_at'].isoformat()}")
        return await self.get(bid)

    async def commit(self, bid: str) -> Row:
        """Commit the batch: no more members join; it finishes once none is pending (at once
        when none is). Committing a committed batch changes nothing."""
        if not await batch_queries.commit_batch(self._pool, self._clock.now(), bid):
            raise BatchNotFound(f"no batch {bid!r}")
        return await self.get(bid)

    async def members(self, bid: str, limit: int) -> list[Row]:
        """The batch's member jobs still stored, oldest first (completed members are pruned)."""
        return list(await batch_queries.batch_members(self._pool, bid, limit))

    async def list(self, after: str | None, limit: int, unfinished: bool) -> list[Row]:
        bids = await batch_queries.list_batches(self._pool, after, limit, unfinished)
        if not bids:
            return []
        return list(await batch_queries.get_batches(self._pool, bids))

    async def get(self, bid: str) -> Row:
        rows = await batch_queries.get_batches(self._pool, [bid])
        if not rows:
            raise BatchNotFound(f"no batch {bid!r}")
        row: Row = rows[0]
        return row


async def batch_closed(db: Executor, bid: str) -> WerkError:
    """The error for a batch a member could not join: not found, or committed."""
    rows = await batch_queries.get_batches(db, [bid])
    if not rows:
        return BatchNotFound(f"no batch {bid!r}")
    if rows[0]["completed_at"] is not None:
        return BatchFinished(f"batch {bid} has finished")
    return BatchCommitted(f"batch {bid} is committed: open it again to add members")


def _callback_job(kind: str, spec: CallbackJob) -> NewJob:
    if kind not in CALLBACK_KINDS:
        raise ValueError(kind)
    given = [f for f in _NOT_FOR_CALLBACKS if getattr(spec, f, None) not in (None, [])]
    if given:
        raise InvalidRequest(
            f"a callback job cannot carry {', '.join(given)}",
            errors=[{"loc": f"on_{kind}.{f}", "message": "not for a callback"} for f in given],
        )
    return spec.new_job(spec.jid or new_jid())
