"""The job life cycle: push, fetch (with long polling), ack, fail, extend, read."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from werk.db import queries
from werk.db.failures import is_connection_error
from werk.db.held import HeldConnection
from werk.db.queries import Executor, NewJob
from werk.domain.clock import Clock
from werk.domain.jids import new_jid, new_jids
from werk.domain.job import FailOutcome
from werk.errors import InvalidRequest, JobNotFound, LeaseLost
from werk.services.coalesce import Coalescer
from werk.services.wakeup import Waiter, WakeHub, counts_by_queue

log = logging.getLogger(__name__)

Row = Mapping[str, Any]


# Not frozen: a frozen dataclass's __init__ costs ~3x, and batches build thousands.
@dataclass(slots=True)
class JobSpec:
    """A validated job as a producer asked for it."""

    jobtype: str
    args: list[Any] = field(default_factory=list)
    queue: str = "default"
    jid: str | None = None
    priority: int = 0
    reserve_for: int = 1800
    retry: int = 25
    backtrace: int = 0
    custom: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None


# Jobs one claim statement takes at most, however many fetches it serves. Claims over one queue
# run in turn (see JobService._claim_together); with 64 workers fetching 100 each, statements
# of 2,000 served 5-20 % more jobs a second than statements of 1,000, and 4,000 no more than
# 2,000 (bench/README.md, stop 22).
CLAIM_MAX = 2000
# Jobs one ack statement completes at most, however many acks it serves (a larger batch ack
# goes alone).
ACK_MAX = 1000


@dataclass(frozen=True, slots=True)
class _Claim:
    queues: tuple[str, ...]
    wid: str
    count: int


# Not frozen: a frozen dataclass's __init__ costs ~3x, and batches build thousands.
@dataclass(slots=True)
class PushResult:
    """``job`` is the stored job or, for a job inserted by a push that handed none of its jobs
    to a fetch, only the columns the statement decided (``queries.push_jobs``' "decided"
    answer); the rest of that job is ``sent``, as stored."""

    job: Row
    created: bool
    sent: NewJob | None = None


@dataclass(frozen=True, slots=True)
class FailResult:
    jid: str
    outcome: FailOutcome
    next_at: datetime | None


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_CANONICAL_UUID = re.compile(_UUID)
_CANONICAL_UUIDS = re.compile(rf"{_UUID}(?:,{_UUID})*")


def _lease_uuid(lease: str) -> str | None:
    """Leases are UUIDs; anything else cannot be a current lease. Returns the canonical form
    (what the server hands out passes as is; other spellings of a UUID are parsed)."""
    if _CANONICAL_UUID.fullmatch(lease):
        return lease
    try:
        return str(uuid.UUID(lease))
    except ValueError:
        return None


def _with_lease_uuids(acks: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The acks whose lease may be current, each lease in canonical form. When every lease is
    canonical already (as Werk hands them out), one regex over them all says so: a check per
    lease was 0.5 us per job in a batch ack. As many commas as separators: no lease holds one."""
    joined = ",".join([lease for _, lease in acks])
    if joined.count(",") == len(acks) - 1 and _CANONICAL_UUIDS.fullmatch(joined):
        return list(acks)
    return [(jid, lid) for jid, lease in acks if (lid := _lease_uuid(lease)) is not None]


class JobService:
    def __init__(
        self, pool: asyncpg.Pool, clock: Clock, hub: WakeHub, *, keep_completed: bool
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._hub = hub
        self._keep_completed = keep_completed
        # Each coalescer writes one statement at a time, on a connection of its own.
        self._push_db = HeldConnection(pool)
        self._ack_db = HeldConnection(pool)
        self._claim_db = HeldConnection(pool)
        self._singles: Coalescer[NewJob, PushResult] = Coalescer(
            self._store_singles, max_items=1000
        )
        self._acks: Coalescer[Sequence[tuple[str, str]], list[bool]] = Coalescer(
            self._ack_together, max_items=ACK_MAX, weight=len
        )
        # A flush takes fetches wanting CLAIM_MAX jobs at most (see _claim_together).
        self._claims: Coalescer[_Claim, list[Row]] = Coalescer(
            self._claim_together, max_items=CLAIM_MAX, weight=lambda claim: claim.count
        )

    async def close(self) -> None:
        """Give the held connections back (before the pool closes)."""
        for held in (self._push_db, self._ack_db, self._claim_db):
            await held.close()

    # -- producers -------------------------------------------------------------------------

    async def push(self, specs: Sequence[JobSpec]) -> list[PushResult]:
        """Store the jobs in one transaction (all or nothing). An existing jid is not pushed again;
        its stored job is returned instead."""
        return await self._store(_new_jobs(specs), self._pool)

    async def push_jids(self, specs: Sequence[JobSpec]) -> tuple[list[str], list[str]]:
        """As ``push``, answered with every job's jid (in order) and the jids that existed.
        Nothing is read back, and no job is stored reserved for a waiting fetch: those fetches
        are woken and claim. For producers that keep no more than the jids."""
        jobs = _new_jobs(specs)
        inserted = await queries.push_jobs(self._pool, self._clock.now(), jobs, None, answer="jids")
        self._hub.jobs_arrived(
            counts_by_queue(r["queue"] for r in inserted if r["state"] == "available")
        )
        stored = {r["jid"] for r in inserted}
        jids = [j.jid for j in jobs]
        return jids, [jid for jid in jids if jid not in stored]

    async def push_one(self, spec: JobSpec) -> PushResult:
        """Push a single job; concurrent single pushes share one statement and one commit."""
        return await self._singles.submit(_to_new_job(spec, spec.jid or new_jid()))

    async def _store_singles(self, jobs: Sequence[NewJob]) -> list[PushResult | Exception]:
        """Independent pushes written together. The same jid pushed twice at once is stored
        once (the first request's job); the later request sees it, as if it came second."""
        unique: dict[str, NewJob] = {}
        for job in jobs:
            unique.setdefault(job.jid, job)
        stored: dict[str, PushResult | Exception] = {}
        try:
            stored.update(
                (r.job["jid"], r) for r in await self._store(list(unique.values()), self._push_db)
            )
        except Exception as exc:
            if len(unique) == 1 or is_connection_error(exc):
                raise
            # One bad job must not fail the others: write them one by one.
            for job in unique.values():
                try:
                    (stored[job.jid],) = await self._store([job], self._push_db)
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

    async def _store(self, jobs: Sequence[NewJob], db: Executor) -> list[PushResult]:
        waiters = self._take_waiters(jobs)
        handed: dict[Waiter, list[Row]] = {w: [] for w in waiters if w is not None}
        # Whole rows are read back only to hand them to fetches; otherwise the jobs as sent and
        # what the statement decided for them are the answer.
        sent = None if handed else {j.jid: j for j in jobs}
        try:
            inserted = await queries.push_jobs(
                db,
                self._clock.now(),
                jobs,
                [w.wid if w else None for w in waiters],
                answer="rows" if sent is None else "decided",
            )
            by_jid = {
                r["jid"]: PushResult(r, True, None if sent is None else sent[r["jid"]])
                for r in inserted
            }
            for job, waiter in zip(jobs, waiters, strict=True):
                row = by_jid[job.jid].job if waiter and job.jid in by_jid else None
                if waiter and row and row["state"] == "active" and row["wid"] == waiter.wid:
                    handed[waiter].append(row)
        finally:  # answer every taken fetch, with its jobs or with none (it looks again)
            undelivered = [r for w, rows in handed.items() if not w.hand_over(rows) for r in rows]
        if undelivered:  # fetches cancelled meanwhile: their jobs are available again now
            try:
                await self.hand_back(undelivered)
            except Exception as exc:  # the push itself committed; these wait out their lease
                log.warning("could not hand back %d undelivered jobs: %s", len(undelivered), exc)
        if len(by_jid) < len(jobs):  # jids that existed: answer with the stored jobs
            missing = [j.jid for j in jobs if j.jid not in by_jid]
            for row in await queries.get_jobs(db, missing):
                by_jid[row["jid"]] = PushResult(job=row, created=False)
        results = [by_jid[j.jid] for j in jobs if j.jid in by_jid]
        self._hub.jobs_arrived(
            counts_by_queue(
                r.job["queue"] for r in results if r.created and r.job["state"] == "available"
            )
        )
        return results

    def _take_waiters(self, jobs: Sequence[NewJob]) -> list[Waiter | None]:
        """Per job, the long-polling fetch on this node it will be stored reserved for (each
        takes up to its count), so that fetch is answered by the push's own commit."""
        waiters: list[Waiter | None] = []
        current: dict[str, Waiter] = {}
        room: dict[str, int] = {}
        none_left: set[str] = set()
        for job in jobs:
            waiter = None
            queue = job.queue
            if job.at is None and queue not in none_left:
                if room.get(queue, 0) == 0:
                    taken = self._hub.take(queue)
                    if taken is None:
                        none_left.add(queue)
                    else:
                        current[queue], room[queue] = taken, taken.count
                if queue not in none_left:
                    waiter = current[queue]
                    room[queue] -= 1
            waiters.append(waiter)
        return waiters

    # -- workers ---------------------------------------------------------------------------

    async def fetch(
        self,
        queues: Sequence[str],
        wid: str,
        count: int,
        wait: float,
        gone: asyncio.Future[None] | None = None,
    ) -> list[Row]:
        """Claim up to ``count`` jobs; with ``wait`` > 0, long-poll until one arrives.

        ``gone`` completes when the requesting client disconnects: the long poll ends at once,
        and jobs reserved for it by then are handed back, so no job waits out a lease nobody
        holds.
        """
        rows = await self._fetch(queues, wid, count, wait, gone)
        if rows and gone is not None and gone.done():
            await self.hand_back(rows)
            return []
        return rows

    async def _fetch(
        self,
        queues: Sequence[str],
        wid: str,
        count: int,
        wait: float,
        gone: asyncio.Future[None] | None,
    ) -> list[Row]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            # Register before claiming, so a push landing between the claim and the wait still
            # wakes us.
            waiter = self._hub.register(queues, wid, count) if wait > 0 else None
            try:
                rows = await self._claims.submit(_Claim(tuple(queues), wid, count))
                if rows:
                    if len(rows) == count:  # there may be more: let another waiter look
                        for q in {r["queue"] for r in rows}:
                            self._hub.wake(q, 1)
                    return _in_claim_order(rows, queues)
                remaining = deadline - loop.time()
                if waiter is None or remaining <= 0 or self._hub.closed:
                    return []
                handed = await self._hub.wait(waiter, remaining, gone)  # at once if gone
                if handed:  # a push stored jobs reserved for us
                    return _in_claim_order(handed, queues)
                if self._hub.closed or (gone is not None and gone.done()):
                    return []
            finally:
                if waiter is not None:
                    self._hub.unregister(waiter)

    async def hand_back(self, rows: Sequence[Row]) -> None:
        """Jobs fetched but not delivered (the client left) become available again, in their
        old place, as if never fetched."""
        queues = await queries.unclaim_jobs(
            self._pool, [r["jid"] for r in rows], [r["lease"] for r in rows]
        )
        self._hub.jobs_arrived(counts_by_queue(queues))

    async def _claim_together(self, claims: Sequence[_Claim]) -> list[list[Row] | Exception]:
        """Concurrent fetches over the same queues are served by one claim statement; fetches
        over different queues run side by side. The coalescer hands over fetches wanting at
        most CLAIM_MAX jobs in all (a fetch wants FETCH_MAX_COUNT at most, far fewer), and the
        fetches beyond wait for the next statement. Two claims over one queue at once read the
        same index and heap pages, and the second passes over every row the first holds locked:
        side by side they cost PostgreSQL more per job than in turn (bench/README.md, stop 22)."""
        by_queues: dict[tuple[str, ...], list[int]] = {}
        for i, c in enumerate(claims):
            by_queues.setdefault(c.queues, []).append(i)
        statements = list(by_queues.values())
        results: list[list[Row] | Exception] = [[] for _ in claims]
        db: Executor = self._claim_db if len(statements) == 1 else self._pool

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

    async def ack(self, jid: str, lease: str) -> None:
        lease_id = _lease_uuid(lease)
        if lease_id is not None and (await self._acks.submit(((jid, lease_id),)))[0]:
            return
        await self._raise_not_current(jid)

    async def _ack_together(
        self, requests: Sequence[Sequence[tuple[str, str]]]
    ) -> list[list[bool]]:
        """Concurrent acks, single or batch, share one statement and one commit: each statement
        costs the server a write that wakes PostgreSQL, and PostgreSQL a transaction."""
        acks = [ack for request in requests for ack in request]
        now = self._clock.now()
        leases = dict(acks)
        if len(leases) == len(acks):
            done = await queries.ack_jobs(
                self._ack_db, now, leases, keep_completed=self._keep_completed
            )
            acked = iter([jid in done for jid, _ in acks])
        else:
            acked = iter(await self._ack_each_jid_once(now, acks))
        return [[next(acked) for _ in request] for request in requests]

    async def _ack_each_jid_once(
        self, now: datetime | None, acks: Sequence[tuple[str, str]]
    ) -> list[bool]:
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
            await queries.ack_jobs(self._ack_db, now, leases, keep_completed=self._keep_completed)
            for leases in statements
        ]
        return [jid in done[n] for (jid, _), n in zip(acks, placed, strict=True)]

    async def ack_many(self, acks: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
        """Returns (acked jids, jids whose lease was not current)."""
        valid = _with_lease_uuids(acks)
        results = await self._acks.submit(valid) if valid else []
        acked = [jid for (jid, _), ok in zip(valid, results, strict=True) if ok]
        done = set(acked)
        if len(done) < len(acked):  # the same jid and lease given twice: say it once
            acked = list(dict.fromkeys(acked))
        return acked, [jid for jid, _ in acks if jid not in done]

    async def fail(
        self,
        jid: str,
        lease: str,
        *,
        errtype: str,
        message: str,
        backtrace: Sequence[str],
        retry_in: float | None,
        no_retry: bool,
    ) -> FailResult:
        lease_id = _lease_uuid(lease)
        row = None
        if lease_id is not None:
            row = await queries.fail_job(
                self._pool,
                self._clock.now(),
                jid,
                lease_id,
                errtype=errtype,
                message=message,
                backtrace=backtrace,
                retry_in=retry_in,
                no_retry=no_retry,
            )
        if row is None:
            await self._raise_not_current(jid)
            raise AssertionError("unreachable")
        return _fail_result(jid, row)

    async def extend(
        self,
        jid: str,
        lease: str,
        *,
        reserve_for: int | None,
        progress: Any,
        set_progress: bool,
    ) -> datetime:
        lease_id = _lease_uuid(lease)
        expires = None
        if lease_id is not None:
            expires = await queries.extend_job(
                self._pool,
                self._clock.now(),
                jid,
                lease_id,
                reserve_for=reserve_for,
                progress_json=orjson.dumps(progress).decode() if set_progress else None,
                set_progress=set_progress,
            )
        if expires is None:
            await self._raise_not_current(jid)
            raise AssertionError("unreachable")
        return expires

    # -- reading ---------------------------------------------------------------------------

    async def get(self, jid: str) -> Row:
        row = await queries.get_job(self._pool, jid)
        if row is None:
            raise JobNotFound(f"no job with jid {jid!r} (completed jobs are deleted at ack)")
        return dict(row)

    async def _raise_not_current(self, jid: str) -> None:
        """A lease that is not current is lease_lost whether or not the job is still stored: an
        ack repeated after its answer was lost must read the same with and without completed-job
        retention, and as in a batch ack, where such jids are listed under ``lease_lost``."""
        if await queries.job_exists(self._pool, jid):
            raise LeaseLost(
                f"the lease presented for job {jid!r} is not its current lease (it expired, was "
                "released, or the job was settled already); nothing was changed"
            )
        raise LeaseLost(
            f"no job with jid {jid!r} is stored (completed jobs are deleted at ack, so this "
            "lease may have been settled already); nothing was changed"
        )

    # -- settling by worker (Faktory's wire protocol: ACK/FAIL carry a jid, no lease) ----------

    async def ack_by_worker(self, jid: str, wid: str) -> bool:
        """Complete the attempt worker ``wid`` holds on ``jid``. False (and nothing changed) when
        the job is not active under that worker: unknown, settled, expired, or re-reserved."""
        acked = await queries.ack_jobs(
            self._pool,
            self._clock.now(),
            {},
            keep_completed=self._keep_completed,
            by_worker={jid: wid},
        )
        return jid in acked

    async def fail_by_worker(
        self, jid: str, wid: str, *, errtype: str, message: str, backtrace: Sequence[str]
    ) -> FailResult:
        """Fail the attempt worker ``wid`` holds on ``jid`` under the job's retry policy; raises
        JobNotFound when the job is not active under that worker (nothing is changed)."""
        row = await queries.fail_job(
            self._pool,
            self._clock.now(),
            jid,
            None,
            errtype=errtype,
            message=message,
            backtrace=backtrace,
            retry_in=None,
            no_retry=False,
            wid=wid,
        )
        if row is None:
            raise JobNotFound(f"no job {jid!r} is reserved by worker {wid!r}")
        return _fail_result(jid, row)


_OUTCOMES = {
    "discard": FailOutcome.DISCARDED,
    "dead": FailOutcome.DEAD,
    "retry": FailOutcome.SCHEDULED,
}


def _in_claim_order(rows: list[Row], queues: Sequence[str]) -> list[Row]:
    """Queues in the order asked, then highest priority, then oldest."""
    order = {q: i for i, q in enumerate(queues)}
    rows.sort(key=lambda r: (order[r["queue"]], -r["priority"], r["seq"]))
    return rows


def _fail_result(jid: str, row: Row) -> FailResult:
    outcome = _OUTCOMES[row["outcome"]]
    next_at = row["run_at"] if outcome is FailOutcome.SCHEDULED else None
    return FailResult(jid=jid, outcome=outcome, next_at=next_at)


def _new_jobs(specs: Sequence[JobSpec]) -> list[NewJob]:
    """The jobs of one batch, jids generated where absent; a jid twice is the caller's error."""
    fresh = iter(new_jids(sum(1 for s in specs if not s.jid)))
    jobs = [_to_new_job(s, s.jid or next(fresh)) for s in specs]
    seen: set[str] = set()
    for i, job in enumerate(jobs):
        if job.jid in seen:
            raise InvalidRequest(
                f"jid {job.jid!r} appears twice in the batch",
                errors=[{"loc": f"jobs.{i}.jid", "message": "duplicate jid in batch"}],
            )
        seen.add(job.jid)
    return jobs


def _to_new_job(spec: JobSpec, jid: str) -> NewJob:
    return NewJob(
        jid=jid,
        jobtype=spec.jobtype,
        queue=spec.queue,
        args=orjson.dumps(spec.args).decode(),
        priority=spec.priority,
        reserve_for=spec.reserve_for,
        retry=spec.retry,
        backtrace=spec.backtrace,
        custom=orjson.dumps(spec.custom).decode(),
        at=spec.at,
    )
