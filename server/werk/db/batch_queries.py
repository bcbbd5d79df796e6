"""Typed wrappers of the batch statements (batch_*.sql). Nothing here decides."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from werk.db.queries import Executor, counter_shard
from werk.db.sql import sql
from werk.domain.job import NewJob


async def new_batch(
    db: Executor,
    now: datetime | None,
    bid: str,
    description: str | None,
    parent: str | None,
    callbacks: Sequence[tuple[str, NewJob]],
) -> Any:
    """Insert the batch and its callback jobs, each (kind, job) waiting for its condition."""
    fields = ("jid", "jobtype", "queue", "args", "priority", "reserve_for", "retry", "backtrace",
              "custom", "keep_result_for")  # fmt: skip
    columns = [[getattr(j, f) for _, j in callbacks] for f in fields]
    return await db.fetchrow(
        sql("batch_new"), now, bid, description, parent, [k for k, _ in callbacks], *columns,
        counter_shard(),
    )  # fmt: skip


async def batch_depth(db: Executor, bid: str, most: int) -> int | None:
    """How deep the batch sits (1: no parent), counted up to ``most``; None: not found."""
    depth: int | None = await db.fetchval(sql("batch_depth"), bid, most)
    return depth


async def join_batch(db: Executor, parent: str) -> str | None:
    """Count a new child batch in ``parent``; None: not found or committed."""
    bid: str | None = await db.fetchval(sql("batch_join"), parent)
    return bid


async def open_batch(db: Executor, bid: str) -> str | None:
    """Open the batch again; None: not found or finished."""
    opened: str | None = await db.fetchval(sql("batch_open"), bid)
    return opened


async def commit_batch(db: Executor, now: datetime | None, bid: str) -> bool:
    """Commit the batch; False: not found."""
    return await db.fetchrow(sql("batch_commit"), bid, now) is not None


async def get_batches(db: Executor, bids: Sequence[str]) -> list[Any]:
    return await db.fetch(sql("batch_get"), list(bids))


async def list_batches(db: Executor, after: str | None, limit: int, unfinished: bool) -> list[str]:
    rows = await db.fetch(sql("batch_list"), after, limit, unfinished)
    return [r["bid"] for r in rows]


async def batch_metrics(db: Executor) -> Any:
    """Batches by state and callbacks released by kind (batch_metrics.sql)."""
    return await db.fetchrow(sql("batch_metrics"))


async def prune_batches(
    db: Executor, now: datetime | None, *, older_than: float, limit: int
) -> int:
    """Delete finished batches nothing can change any more (batch_prune.sql); how many went."""
    return len(await db.fetch(sql("batch_prune"), now, older_than, limit))


async def batch_members(db: Executor, bid: str, limit: int) -> list[Any]:
    """The first ``limit`` member jobs still stored (batch_members.sql)."""
    return await db.fetch(sql("batch_members"), bid, limit)
