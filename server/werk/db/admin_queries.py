"""Typed wrappers for the operators' statements (queues, job administration, workers, history,
metrics): one function per SQL file. Callers pass a pool or a connection; nothing here decides."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from werk.db.queries import Executor
from werk.db.sql import sql


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    size: int
    latency_seconds: float
    paused: bool
    counts: dict[str, int]


async def set_queue_paused(db: Executor, queue: str, paused: bool) -> bool:
    row = await db.fetchrow(sql("queue_pause"), queue, paused)
    assert row is not None
    return bool(row["paused"])


async def clear_queue(db: Executor, queue: str, limit: int) -> int:
    deleted: int = await db.fetchval(sql("queue_clear"), queue, limit)
    return deleted


async def list_queues(
    db: Executor, now: datetime | None, queue: str | None = None
) -> list[QueueRow]:
    rows = await db.fetch(sql("queue_list"), now, queue)
    return [_queue_row(r) for r in rows]


def _queue_row(r: Any) -> QueueRow:
    return QueueRow(
        name=r["name"],
        size=int(r["size"]),
        latency_seconds=float(r["latency_seconds"]),
        paused=bool(r["paused"]),
        counts={str(k): int(v) for k, v in r["counts"].items()},
    )
