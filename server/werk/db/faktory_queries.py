"""Typed wrappers for the statements only Faktory's wire protocol needs (settling by worker
instead of by lease, INFO's sets, FLUSH, MUTATE): one function per SQL file. Callers pass a pool
or a connection; nothing here decides."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from werk.db.queries import Executor, _shard
from werk.db.sql import sql


@dataclass(frozen=True, slots=True)
class SetSizes:
    scheduled: int
    retries: int
    dead: int
    working: int


async def ack_job_by_worker(
    db: Executor, now: datetime | None, jid: str, wid: str, *, keep_completed: bool
) -> bool:
    row = await db.fetchrow(sql("job_ack_by_worker"), now, jid, wid, keep_completed, _shard())
    return row is not None


async def fail_job_by_worker(
    db: Executor,
    now: datetime | None,
    jid: str,
    wid: str,
    *,
    errtype: str,
    message: str,
    backtrace: Sequence[str],
) -> Any | None:
    return await db.fetchrow(
        sql("job_fail_by_worker"), now, jid, wid, errtype, message, list(backtrace), _shard()
    )


async def set_sizes(db: Executor) -> SetSizes:
    row = await db.fetchrow(sql("faktory_sets"))
    assert row is not None
    return SetSizes(
        scheduled=row["scheduled"], retries=row["retries"], dead=row["dead"], working=row["working"]
    )


async def flush(db: Executor) -> int:
    row = await db.fetchrow(sql("faktory_flush"))
    assert row is not None
    jobs: int = row["jobs"]
    return jobs


async def mutate(
    db: Executor,
    now: datetime | None,
    *,
    cmd: str,
    target: str,
    jobtype: str | None,
    jids: Sequence[str] | None,
    regex: str | None,
) -> list[Any]:
    return await db.fetch(
        sql("faktory_mutate"),
        now,
        cmd,
        target,
        jobtype,
        list(jids) if jids is not None else None,
        regex,
    )
