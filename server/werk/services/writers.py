"""The batching writers below the job services: group commit over a pinned connection.

Requests that arrive while a statement is in flight are written together by the next one, so N
concurrent pushes (or claims, or acks) cost one round trip and one commit instead of N. Nothing
waits on a timer: with no statement in flight, a request is written at once; each caller is
answered only after its own commit. Each writer runs one statement at a time, so it keeps one
pooled connection for itself (``HeldConnection``) instead of taking one from the pool per
statement. The writers only batch and write; what to write is the services' decision."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import asyncpg

from werk.db import queries
from werk.db.failures import is_connection_error
from werk.db.held import HeldConnection
from werk.db.queries import Executor
from werk.domain.clock import Clock
from werk.domain.job import NewJob, PushResult

T = TypeVar("T")
R = TypeVar("R")

Row = Mapping[str, Any]

# Single pushes one push statement takes at most.
PUSH_MAX = 1000
# Jobs one claim statement takes at most, however many fetches it serves: larger statements
# serve more jobs a second, up to a point past which they serve no more and only hold their
# fetches longer.
CLAIM_MAX = 2000
# Jobs one ack statement completes at most, however many acks it serves (a larger batch ack
# goes alone).
ACK_MAX = 1000


class Coalescer(Generic[T, R]):
    def __init__(
        self,
        write: Callable[[Sequence[T]], Awaitable[Sequence[R | Exception]]],
        *,
        max_items: int,
        weight: Callable[[T], int] = lambda _: 1,
    ) -> None:
        """``write`` stores items and returns one result per item, in order: a value, or the
        exception that item's caller should get. One write takes items up to ``max_items`` of
        ``weight`` in all (an item that weighs more goes alone), so a statement's arrays stay
        bounded when each item is itself a batch."""
        self._write = write
        self._max_items = max_items
        self._weight = weight
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flushing is None:
            self._flushing = asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._take()]
                del self._pending[: len(batch)]
                try:
                    results = await self._write([item for item, _ in batch])
                except BaseException as exc:  # every caller of this batch hears of it
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._flushing = None

    def _take(self) -> int:
        """How many of the pending items the next write takes (at least one)."""
        total = 0
        for n, (item, _) in enumerate(self._pending):
            total += self._weight(item)
            if total > self._max_items:
                return max(n, 1)
        return len(self._pending)


class HeldWriter(Coalescer[T, R]):
    """A coalescer whose writes run on one pooled connection it keeps (``_db``)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        write: Callable[[Sequence[T]], Awaitable[Sequence[R | Exception]]],
        *,
        max_items: int,
        weight: Callable[[T], int] = lambda _: 1,
    ) -> None:
        super().__init__(write, max_items=max_items, weight=weight)
        self._db = HeldConnection(pool)

    async def close(self) -> None:
        """Give the held connection back (before the pool closes)."""
        await self._db.close()


StoreJobs = Callable[[Sequence[NewJob], Executor], Awaitable[list[PushResult]]]


class PushWriter(HeldWriter[NewJob, PushResult]):
    """Single pushes written together by ``store`` (the push service's statement)."""

    def __init__(self, pool: asyncpg.Pool, store: StoreJobs) -> None:
        super().__init__(pool, self._store_together, max_items=PUSH_MAX)
        self._store = store

    async def _store_together(self, jobs: Sequence[NewJob]) -> list[PushResult | Exception]:
        """Independent pushes written together. The same jid pushed twice at once is stored
        once (the first request's job); the later request sees it, as if it came second."""
        unique: dict[str, NewJob] = {}
        for job in jobs:
            unique.setdefault(job.jid, job)
        stored: dict[str, PushResult | Exception] = {}
        try:
            stored.update(
                (r.job["jid"], r) for r in await self._store(list(unique.values()), self._db)
            )
        except Exception as exc:
            if len(unique) == 1 or is_connection_error(exc):
                raise
            # One bad job must not fail the others: write them one by one.
            for job in unique.values():
                try:
                    (stored[job.jid],) = await self._store([job], self._db)
                except Exception as single:
                    stored[job.jid] = single
        results: list[PushResult | Exception] = []
        answered: set[str] = set()
        for job in jobs:
            result = stored[job.jid]
            if job.jid in answered and isinstance(result, PushResult):
                result = PushResult(job=result.job, created=False, sent=result.sent)
            answered.add(job.jid)
            results.append(result)
        return results


@dataclass(frozen=True, slots=True)
class Claim:
    """A fetch's claim: worker ``wid`` wants up to ``count`` jobs from ``queues``."""

    queues: tuple[str, ...]
    wid: str
    count: int


class ClaimWriter(HeldWriter[Claim, list[Row]]):
    """Concurrent fetches over the same queues are served by one claim statement; fetches over
    different queues run side by side. A statement serves fetches wanting at most CLAIM_MAX
    jobs in all (a fetch wants FETCH_MAX_COUNT at most, far fewer), and the fetches beyond wait
    for the next statement. Two claims over one queue at once read the same index and heap
    pages, and the second passes over every row the first holds locked: side by side they cost
    PostgreSQL more per job than in turn."""

    def __init__(self, pool: asyncpg.Pool, clock: Clock) -> None:
        super().__init__(pool, self._claim_together, max_items=CLAIM_MAX, weight=_claim_count)
        self._pool = pool
        self._clock = clock

    async def _claim_together(self, claims: Sequence[Claim]) -> list[list[Row] | Exception]:
        by_queues: dict[tuple[str, ...], list[int]] = {}
        for i, c in enumerate(claims):
            by_queues.setdefault(c.queues, []).append(i)
        statements = list(by_queues.values())
        results: list[list[Row] | Exception] = [[] for _ in claims]
        db: Executor = self._db if len(statements) == 1 else self._pool

        async def run(members: list[int]) -> None:
            owners = [i for i in members for _ in range(claims[i].count)]
            try:
                rows = await queries.fetch_jobs(
                    db,
                    self._clock.now(),
                    claims[members[0]].queues,
                    [claims[i].wid for i in owners],
                )
            except Exception as exc:
                for i in members:
                    results[i] = exc
                return
            for row in rows:
                taken = results[owners[row["slot"] - 1]]
                assert isinstance(taken, list)
                taken.append(row)

        if len(statements) == 1:  # the usual case: no task and no gather for one statement
            await run(statements[0])
        else:
            await asyncio.gather(*(run(members) for members in statements))
        return results


def _claim_count(claim: Claim) -> int:
    return claim.count


# One ack request: its (jid, lease) pairs, leases in canonical form, and the results to store
# (per pair, as JSON already encoded; None: no results). Per pair, not per jid: of two acks of
# one job, only the one whose lease is current may write its result.
AckRequest = tuple[Sequence[tuple[str, str]], Mapping[tuple[str, str], Any] | None]

# Per pair of an ack request: None when its lease was not current, else whether the completed job
# was kept (False: deleted).
Acked = bool | None


class AckWriter(HeldWriter[AckRequest, list[Acked]]):
    """Concurrent acks, single or batch, share one statement and one commit: each statement
    costs the server a write that wakes PostgreSQL, and PostgreSQL a transaction. An item is one
    request's (jid, lease) pairs and results; its answer says per pair whether the job was
    completed, and if so whether it was kept."""

    def __init__(self, pool: asyncpg.Pool, clock: Clock, *, keep_completed: bool) -> None:
        super().__init__(pool, self._ack_together, max_items=ACK_MAX, weight=_ack_count)
        self._clock = clock
        self._keep_completed = keep_completed

    async def _ack_together(self, requests: Sequence[AckRequest]) -> list[list[Acked]]:
        acks = [ack for pairs, _ in requests for ack in pairs]
        results: dict[tuple[str, str], Any] = {}
        for _, given in requests:
            if given:
                results.update(given)
        now = self._clock.now()
        leases = dict(acks)
        if len(leases) == len(acks):
            done, kept = await queries.ack_jobs(
                self._db,
                now,
                leases,
                keep_completed=self._keep_completed,
                results=_per_jid(leases, results),
            )
            acked = iter([_acked(jid, done, kept) for jid, _ in acks])
        else:
            acked = iter(await self._ack_each_jid_once(now, acks, results))
        return [[next(acked) for _ in pairs] for pairs, _ in requests]

    async def _ack_each_jid_once(
        self,
        now: datetime | None,
        acks: Sequence[tuple[str, str]],
        results: Mapping[tuple[str, str], Any],
    ) -> list[Acked]:
        """Acks that name a job more than once (a stale lease beside the current one, or a retry
        of the same ack): the statement takes one lease per jid, so each further lease for a jid
        goes to a next statement. Items with the same jid and lease share one."""
        statements: list[dict[str, str]] = []
        placed: list[int] = []
        for jid, lease in acks:
            n = 0
            while n < len(statements) and statements[n].get(jid, lease) != lease:
                n += 1
            if n == len(statements):
                statements.append({})
            statements[n][jid] = lease
            placed.append(n)
        done = [
            await queries.ack_jobs(
                self._db,
                now,
                leases,
                keep_completed=self._keep_completed,
                results=_per_jid(leases, results),
            )
            for leases in statements
        ]
        return [_acked(jid, *done[n]) for (jid, _), n in zip(acks, placed, strict=True)]


def _per_jid(
    leases: Mapping[str, str], results: Mapping[tuple[str, str], Any]
) -> dict[str, Any] | None:
    """The results of one statement, which names each jid once, with the lease it gives."""
    if not results:
        return None
    return {jid: results[(jid, lease)] for jid, lease in leases.items() if (jid, lease) in results}


def _ack_count(request: AckRequest) -> int:
    return len(request[0])


def _acked(jid: str, done: set[str], kept: set[str]) -> Acked:
    if jid not in done:
        return None
    return jid in kept
