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


async def clear_queue(db: Executor, queue: str, limit: int) -> list[str]:
    """Delete up to ``limit`` available jobs of ``queue``; returns their jids."""
    return [r["jid"] for r in await db.fetch(sql("queue_clear"), queue, limit)]


async def list_queues(
    db: Executor, now: datetime | None, queue: str | None = None
) -> list[QueueRow]:
    rows = await db.fetch(
        sql("queue_list", pairs="queue_state_pairs", counts="queue_state_counts"), now, queue
    )
    return [_queue_row(r) for r in rows]


def _queue_row(r: Any) -> QueueRow:
    return QueueRow(
        name=r["name"],
        size=int(r["size"]),
        latency_seconds=float(r["latency_seconds"]),
        paused=bool(r["paused"]),
        counts={str(k): int(v) for k, v in r["counts"].items()},
    )


# -- jobs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a list or a bulk action covers; None matches anything."""

    state: str | None = None
    queue: str | None = None
    jobtype: str | None = None
    words: str | None = None  # q: each of its words begins a word of the job (werk_job_search)
    failed: bool | None = None  # failed at least once (retrying/dead) or never

    def args(self) -> tuple[Any, ...]:
        return (self.state, self.queue, self.jobtype, self.words, self.failed)


async def list_jobs(
    db: Executor,
    where: JobFilter,
    *,
    newest_first: bool,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[Any]:
    """A page of the matching jobs that are not available, by creation time after ``after``
    (created_at, jid)."""
    created_at, jid = after if after is not None else (None, None)
    return await db.fetch(job_list_sql(newest_first), *where.args(), created_at, jid, limit)


def job_list_sql(newest_first: bool) -> str:
    """admin_job_list.sql in one order, the pair walk and the search filled in (matched before
    after: the part matched holds the after marker)."""
    order, after = ("desc", "older") if newest_first else ("asc", "newer")
    return sql("admin_job_list", pairs="queue_state_pairs", search="admin_job_search",
               matched="admin_job_list.matched", order=f"admin_job_list.{order}",
               after=f"admin_job_list.{after}")  # fmt: skip


async def list_available_jobs(
    db: Executor,
    where: JobFilter,
    *,
    last_first: bool,
    after: tuple[int, int] | None,
    limit: int,
) -> list[Any]:
    """A page of the matching available jobs in the order workers take them (or its reverse)
    after ``after`` (priority, seq)."""
    priority, seq = after if after is not None else (None, None)
    return await db.fetch(job_list_available_sql(last_first), *where.args(), priority, seq, limit)


def job_list_available_sql(last_first: bool) -> str:
    """admin_job_list_available.sql in one order (walk before filter: the walk holds it)."""
    order = "behind" if last_first else "ahead"
    name = "admin_job_list_available"
    return sql(name, pairs="queue_state_pairs", search="admin_job_search",
               walk=f"{name}.{order}", filter=f"{name}.filter", after=f"{name}.after_{order}",
               order=f"{name}.order_{order}")  # fmt: skip


JOB_ACTIONS = frozenset({"retry", "kill", "cancel", "delete"})


async def act_on_jobs(
    db: Executor,
    action: str,
    now: datetime | None,
    where: JobFilter,
    *,
    jids: list[str] | None,
    limit: int,
) -> list[Any]:
    """Apply ``action`` (one of JOB_ACTIONS) to at most ``limit`` matching jobs; returns the
    (jid, queue) rows it changed."""
    if action not in JOB_ACTIONS:
        raise ValueError(f"no job action {action!r}")
    return await db.fetch(job_act_sql(), *where.args(), jids, limit, now, action)


def job_act_sql() -> str:
    """admin_job_act.sql, the search (as the job pages read it) and its bounds filled in."""
    return sql("admin_job_act", search="admin_job_search", bounds="admin_job_act.bounds")


# -- workers --------------------------------------------------------------------------------


async def list_workers(db: Executor, *, include_gone: bool, wid: str | None = None) -> list[Any]:
    return await db.fetch(sql("worker_list"), include_gone, wid)


async def signal_all_workers(db: Executor, state: str) -> list[Any]:
    return await db.fetch(sql("worker_signal_all"), state)


async def signal_worker(db: Executor, wid: str, state: str) -> str | None:
    found: str | None = await db.fetchval(sql("worker_signal_one"), wid, state)
    return found


# -- history and metrics --------------------------------------------------------------------


async def history(db: Executor, now: datetime | None, days: int, queue: str | None) -> list[Any]:
    return await db.fetch(sql("admin_history"), now, days, queue)


@dataclass(frozen=True, slots=True)
class QueueCounters:
    queue: str
    pushed: int
    processed: int
    failed: int
    leases_expired: int
    expired: int  # jobs expired (not started by their expires_at)


async def metrics_counters(db: Executor) -> tuple[list[QueueCounters], dict[str, int]]:
    """Lifetime counters per queue, and live workers per instructed state."""
    rows = await db.fetch(sql("metrics_counters"))
    queues = [
        QueueCounters(
            r["name"], r["pushed"], r["processed"], r["failed"], r["leases_expired"], r["expired"]
        )
        for r in rows
        if r["kind"] == "queue"
    ]
    workers = {r["name"]: int(r["pushed"]) for r in rows if r["kind"] == "workers"}
    return queues, workers
