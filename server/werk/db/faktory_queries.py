"""Typed wrappers for the statements only Faktory's wire protocol needs (INFO's sets, FLUSH,
MUTATE): one function per SQL file. Callers pass a pool
or a connection; nothing here decides."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from werk.db.queries import Executor
from werk.db.sql import sql


@dataclass(frozen=True, slots=True)
class SetSizes:
    scheduled: int
    retries: int
    dead: int
    working: int


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
