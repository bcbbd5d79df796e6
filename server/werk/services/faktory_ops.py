"""Operations that only Faktory's wire protocol asks for and no other service offers yet: the
sizes of Faktory's sets (INFO), FLUSH and MUTATE. The decisions (which jobs a command touches,
who to wake) are made here; the translation from the wire lives in ``werk.faktory``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from werk.db import faktory_queries
from werk.db.faktory_queries import SetSizes
from werk.domain.clock import Clock
from werk.errors import InvalidRequest
from werk.services.wakeup import WakeHub, counts_by_queue

MUTATE_COMMANDS = ("kill", "requeue", "discard", "clear")
MUTATE_TARGETS = ("retries", "scheduled", "dead")


@dataclass(frozen=True, slots=True)
class MutateFilter:
    jobtype: str | None = None
    jids: Sequence[str] | None = None
    regex: str | None = None  # a POSIX regular expression over the job's JSON


class FaktoryOps:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, hub: WakeHub) -> None:
        self._pool = pool
        self._clock = clock
        self._hub = hub

    async def set_sizes(self) -> SetSizes:
        return await faktory_queries.set_sizes(self._pool)

    async def flush(self) -> int:
        """Delete every job, counter and queue flag; returns how many jobs were deleted. Every
        request waiting for a job's result, here or on another node, is answered at once."""
        deleted = await faktory_queries.flush(self._pool)
        self._hub.all_settled()
        return deleted

    async def mutate(self, cmd: str, target: str, where: MutateFilter) -> int:
        """Apply ``cmd`` to the jobs of set ``target`` that match; returns how many changed."""
        if cmd not in MUTATE_COMMANDS:
            raise InvalidRequest(f"unknown mutate command {cmd!r}; use one of {MUTATE_COMMANDS}")
        if target not in MUTATE_TARGETS:
            raise InvalidRequest(f"unknown mutate target {target!r}; use one of {MUTATE_TARGETS}")
        try:
            rows = await faktory_queries.mutate(
                self._pool,
                self._clock.now(),
                cmd=cmd,
                target=target,
                jobtype=where.jobtype,
                jids=where.jids,
                regex=where.regex,
            )
        except asyncpg.InvalidRegularExpressionError as exc:
            raise InvalidRequest(f"invalid filter pattern: {exc}") from exc
        requeued = [r["queue"] for r in rows if r["action"] == "requeued"]
        self._hub.jobs_arrived(counts_by_queue(requeued))
        self._hub.jobs_settled((), readable=[r["jid"] for r in rows if r["action"] != "requeued"])
        return len(rows)
