"""What operators do to jobs and workers, and the daily history.

Every action is one set-based statement (see db/sql/admin_job_*.sql); bulk actions are bounded
and report how many jobs they changed, so an operator can repeat them until nothing is left.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg
import orjson

from werk.db import admin_queries, queries
from werk.db.admin_queries import JobFilter
from werk.domain.clock import Clock
from werk.domain.job import PRIORITY_MAX, PRIORITY_MIN, JobState, WorkerState
from werk.domain.json_values import INT64
from werk.domain.times import check_time
from werk.errors import InvalidRequest, JobNotFound, JobStateConflict, WorkerNotFound
from werk.services.queues import check_queue_name
from werk.services.wakeup import WakeHub, counts_by_queue

Row = Mapping[str, Any]
JobAction = Literal["retry", "kill", "cancel", "delete"]

# A state filter may also name "retrying": scheduled jobs that failed before.
RETRYING = "retrying"
FILTER_STATES = frozenset({*(s.value for s in JobState), RETRYING})

BULK_MAX = 10_000
PAGE_MAX = 500

_APPLIES_TO: dict[str, str] = {
    "retry": "dead, expired and scheduled (including retrying) jobs",
    "kill": "scheduled, available and active jobs",
    "cancel": "scheduled, available and active jobs",
    "delete": "jobs in any state",
}


@dataclass(frozen=True, slots=True)
class JobQuery:
    """Operator-facing filters; ``text`` (q) is words, each of which must begin a word of the
    job's args, custom, errtype or message (case-insensitive)."""

    state: str | None = None
    queue: str | None = None
    jobtype: str | None = None
    text: str | None = None
    failed: bool | None = None

    def to_filter(self) -> JobFilter:
        state, failed = self.state, self.failed
        if state is not None and state not in FILTER_STATES:
            raise InvalidRequest(
                f"unknown state {state!r}; use one of {', '.join(sorted(FILTER_STATES))}",
                errors=[{"loc": "state", "message": "unknown state"}],
            )
        if state == RETRYING:
            state, failed = JobState.SCHEDULED.value, True
        if self.queue is not None:
            check_queue_name(self.queue)
        return JobFilter(
            state=state,
            queue=self.queue,
            jobtype=self.jobtype or None,
            words=self.text or None,
            failed=failed,
        )


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: list[Row]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page ended: among the jobs that are not available, at (created_at, jid); among
    the available ones, which are listed after them in the order workers take them, at
    (priority, seq)."""

    created: tuple[datetime, str] | None = None
    claim: tuple[int, int] | None = None


def encode_cursor(row: Row) -> str:
    if row["state"] == JobState.AVAILABLE:
        raw = orjson.dumps([row["priority"], row["seq"]])
    else:
        raw = orjson.dumps([row["created_at"].isoformat(), row["jid"]])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Cursor:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        first, second = orjson.loads(raw)
        if type(first) is int and type(second) is int:
            if not (PRIORITY_MIN <= first <= PRIORITY_MAX and 0 <= second < INT64):
                raise ValueError("not a place in a queue")
            return Cursor(claim=(first, second))
        if not isinstance(second, str) or "\x00" in second:  # no stored jid holds NUL
            raise ValueError("not a jid")
        return Cursor(created=(check_time(datetime.fromisoformat(first)), second))
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise InvalidRequest(
            "invalid cursor: pass next_cursor from the previous page unchanged",
            errors=[{"loc": "cursor", "message": "invalid cursor"}],
        ) from exc


class AdminService:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, hub: WakeHub) -> None:
        self._pool = pool
        self._clock = clock
        self._hub = hub

    # -- jobs ----------------------------------------------------------------------------

    async def list_jobs(
        self,
        query: JobQuery,
        *,
        cursor: str | None = None,
        limit: int = 50,
        newest_first: bool = True,
    ) -> JobPage:
        """One page of matching jobs; ``next_cursor`` is None on the last page. The jobs that
        are not available come by creation time; the available ones after them, in the order
        workers take them (newest first: the last in line first)."""
        if not 1 <= limit <= PAGE_MAX:
            raise InvalidRequest(f"limit must be between 1 and {PAGE_MAX}")
        where = query.to_filter()
        after = decode_cursor(cursor) if cursor else Cursor()
        rows: list[Row] = []
        if where.state != JobState.AVAILABLE and after.claim is None:
            rows = await admin_queries.list_jobs(
                self._pool, where, newest_first=newest_first, after=after.created, limit=limit + 1
            )
        if where.state in (None, JobState.AVAILABLE) and len(rows) <= limit:
            rows += await admin_queries.list_available_jobs(
                self._pool, where, last_first=newest_first, after=after.claim,
                limit=limit + 1 - len(rows),
            )  # fmt: skip
        more = len(rows) > limit
        rows = rows[:limit]
        return JobPage(
            jobs=[dict(r) for r in rows],
            next_cursor=encode_cursor(rows[-1]) if more and rows else None,
        )

    async def act(self, action: Literal["retry", "kill", "cancel"], jid: str) -> Row:
        """Apply ``action`` to one job; returns the job afterwards."""
        await self._act_one(action, jid)
        job = await queries.get_job(self._pool, jid)
        if job is None:  # deleted (or acked) in the meantime
            raise JobNotFound(f"no job with jid {jid!r}")
        return dict(job)

    async def delete(self, jid: str) -> None:
        await self._act_one("delete", jid)

    async def _act_one(self, action: JobAction, jid: str) -> None:
        rows = await admin_queries.act_on_jobs(
            self._pool, action, self._clock.now(), JobFilter(), jids=[jid], limit=1
        )
        if not rows:
            current = await queries.get_job(self._pool, jid)
            if current is None:
                raise JobNotFound(f"no job with jid {jid!r}")
            raise JobStateConflict(
                f"job {jid!r} is {current['state']}; {action} applies to {_APPLIES_TO[action]}"
            )
        self._woken(action, rows)

    async def act_bulk(self, action: JobAction, query: JobQuery, *, limit: int = 1000) -> int:
        """Apply ``action`` to at most ``limit`` matching jobs (oldest first); returns how many
        changed. Repeat while it returns ``limit`` to cover more."""
        if not 1 <= limit <= BULK_MAX:
            raise InvalidRequest(f"limit must be between 1 and {BULK_MAX}")
        rows = await admin_queries.act_on_jobs(
            self._pool, action, self._clock.now(), query.to_filter(), jids=None, limit=limit
        )
        self._woken(action, rows)
        return len(rows)

    async def act_many(self, action: JobAction, jids: list[str]) -> int:
        """Apply ``action`` to the listed jobs (those in a state it applies to); returns how
        many changed."""
        if len(jids) > BULK_MAX:
            raise InvalidRequest(f"at most {BULK_MAX} jids at once")
        if not jids:
            return 0
        rows = await admin_queries.act_on_jobs(
            self._pool, action, self._clock.now(), JobFilter(), jids=jids, limit=len(jids)
        )
        self._woken(action, rows)
        return len(rows)

    def _woken(self, action: str, rows: list[Any]) -> None:
        if action == "retry":
            self._hub.jobs_arrived(counts_by_queue(r["queue"] for r in rows))
        else:  # killed, cancelled or deleted: their result waiters, on every node, look again
            self._hub.jobs_settled((), readable=[r["jid"] for r in rows])

    # -- workers -------------------------------------------------------------------------

    async def workers(self, *, include_gone: bool = False) -> list[Row]:
        rows = await admin_queries.list_workers(self._pool, include_gone=include_gone)
        return [dict(r) for r in rows]

    async def signal(self, wid: str, state: WorkerState) -> str:
        """Ask one worker to quiet or terminate; returns its state (a state only moves
        forward, so quieting a terminating worker leaves it terminating)."""
        found = await admin_queries.signal_worker(self._pool, wid, state.value)
        if found is None:
            raise WorkerNotFound(f"no live worker with wid {wid!r}")
        return found

    async def signal_all(self, state: WorkerState) -> int:
        """Ask every live worker to quiet or terminate; returns how many changed state."""
        return len(await admin_queries.signal_all_workers(self._pool, state.value))

    # -- totals and history --------------------------------------------------------------

    async def totals(self) -> dict[str, int]:
        """Lifetime processed/failed/pushed (from the counters) and live workers; cheap enough
        to poll."""
        counters, workers = await admin_queries.metrics_counters(self._pool)
        return {
            "processed": sum(c.processed for c in counters),
            "failed": sum(c.failed for c in counters),
            "pushed": sum(c.pushed for c in counters),
            "workers": sum(workers.values()),
        }

    async def history(self, days: int, queue: str | None = None) -> list[Row]:
        if not 1 <= days <= 366:
            raise InvalidRequest("days must be between 1 and 366")
        if queue is not None:
            check_queue_name(queue)
        rows = await admin_queries.history(self._pool, self._clock.now(), days, queue)
        return [dict(r) for r in rows]
