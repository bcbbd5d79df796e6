"""Pushing jobs: what a push stores, which waiting fetch a due job is stored reserved for, and
what the producer is answered; and reading a job back."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from werk.db import queries
from werk.db.queries import Executor
from werk.domain.bodies import JobPush
from werk.domain.clock import Clock
from werk.domain.dependencies import dependency_edges
from werk.domain.jids import new_jid, new_jids
from werk.domain.job import DependencyEdge, NewJob, OnConflict, PushResult
from werk.domain.unique import unique_lock
from werk.errors import DependencyNotFound, InvalidRequest, JobNotFound, NotUnique
from werk.services.batches import batch_closed
from werk.services.claim import ClaimService
from werk.services.dependency_reads import AnswerBudget, with_dependencies
from werk.services.wakeup import Waiter, WakeHub, counts_by_queue
from werk.services.writers import PushWriter

log = logging.getLogger(__name__)

Row = Mapping[str, Any]

# How often a unique push is written again after losing a race (a jid or a waiting holder taken
# by another transaction between this statement's snapshot and its insert); each retry sees
# that transaction committed, so one more attempt settles it.
UNIQUE_ATTEMPTS = 5
# How many of a job's dependents a read of the job lists (a fan-in has one dependent, a fan-out
# may have thousands).
DEPENDENTS_SHOWN = 1000


class PushService:
    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        hub: WakeHub,
        claim: ClaimService,
        *,
        dependencies: AnswerBudget,
    ) -> None:
        self._pool = pool
        self._dependencies = dependencies
        self._clock = clock
        self._hub = hub
        self._claim = claim
        self._singles = PushWriter(pool, self._store)

    async def close(self) -> None:
        """Give the held connection back (before the pool closes)."""
        await self._singles.close()

    async def push(self, specs: Sequence[JobPush]) -> list[PushResult]:
        """Store the jobs in one transaction (all or nothing). An existing jid is not pushed again;
        its stored job is returned instead. A job whose unique key another job holds is answered
        with that job (``conflict`` says what was done); unique keys must differ in a batch."""
        jobs = _new_jobs(specs)
        if any(s.depends_on or s.batch for s in specs):
            return await self._store_dependent(specs, jobs)
        if any(j.unique for j in jobs):
            return await self._store_unique(jobs)
        return await self._store(jobs, self._pool)

    async def push_jids(
        self, specs: Sequence[JobPush]
    ) -> tuple[list[str], list[str], list[PushResult]]:
        """As ``push``, answered with every job's jid (in order: a holder's for a job whose
        unique key another job holds), the jids that existed, and (only when unique jobs were
        pushed, else empty) per job its result. Nothing is read back, and no job is stored
        reserved for a waiting fetch: those fetches are woken and claim. For producers that keep
        no more than the jids."""
        jobs = _new_jobs(specs)
        if any(s.depends_on or s.batch for s in specs):
            results = await self._store_dependent(specs, jobs)
            return (
                [r.job["jid"] for r in results],
                [r.job["jid"] for r in results if not r.created],
                [],
            )
        if any(j.unique for j in jobs):
            results = await self._store_unique(jobs)
            return (
                [r.job["jid"] for r in results],
                [r.job["jid"] for r in results if not r.created and r.conflict is None],
                list(results),
            )
        inserted = await queries.push_jobs(self._pool, self._clock.now(), jobs, None, answer="jids")
        self._hub.jobs_arrived(
            counts_by_queue(r["queue"] for r in inserted if r["state"] == "available")
        )
        stored = {r["jid"] for r in inserted}
        jids = [j.jid for j in jobs]
        return jids, [jid for jid in jids if jid not in stored], []

    async def push_one(self, spec: JobPush) -> PushResult:
        """Push a single job; concurrent single pushes share one statement and one commit
        (unique jobs excepted: each is written alone, as its answer may be another job). Raises
        NotUnique when another job holds its key and it says on_conflict reject."""
        job = _to_new_job(spec, spec.jid or new_jid())
        if spec.depends_on or spec.batch:
            (result,) = await self._store_dependent([spec], [job])
            return result
        if job.unique is None:
            return await self._singles.submit(job)
        (result,) = await self._store_unique([job])
        if result.conflict is OnConflict.REJECT:
            raise NotUnique(result.job["jid"])
        return result

    async def _store_unique(self, jobs: Sequence[NewJob]) -> list[PushResult]:
        """Store jobs of which some are unique: one statement stores the new ones and meets the
        holders of keys already held. A job whose key is held is answered with the holder
        (``conflict``: what its on_conflict did); a replace that meets an active holder, or a
        jid another push inserted meanwhile, is written again, and sees that push."""
        results: dict[str, PushResult] = {}
        pending = list(jobs)
        for _ in range(UNIQUE_ATTEMPTS):
            try:
                rows = await queries.push_unique_jobs(self._pool, self._clock.now(), pending)
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name != "werk_jobs_pkey":
                    raise
                continue  # a jid inserted meanwhile: the next statement leaves it out
            by_jid = {r["jid"]: r for r in rows if r["created"]}
            by_key = {r["unique_key"]: r for r in rows if not r["created"]}
            again = []
            for job in pending:
                row = by_jid.get(job.jid)
                if row is not None:
                    results[job.jid] = PushResult(job=row, created=True)
                    continue
                holder = by_key.get(job.unique.key) if job.unique else None
                if holder is None:
                    continue  # the jid exists: read below
                mode = job.unique.on_conflict if job.unique else OnConflict.REJECT
                if mode is OnConflict.REPLACE and holder["state"] == "active":
                    again.append(job)  # it became active after this statement's snapshot
                    continue
                results[job.jid] = PushResult(job=holder, created=False, conflict=mode)
            self._hub.jobs_arrived(
                counts_by_queue(r["queue"] for r in rows if r["state"] == "available")
            )
            pending = again
            if not pending:
                break
        else:
            raise RuntimeError(f"a unique push lost a race {UNIQUE_ATTEMPTS} times in a row")
        missing = [j.jid for j in jobs if j.jid not in results]
        if missing:
            for row in await queries.get_jobs(self._pool, missing):
                results[row["jid"]] = PushResult(job=row, created=False)
        return [results[j.jid] for j in jobs if j.jid in results]

    async def _store_dependent(
        self, specs: Sequence[JobPush], jobs: Sequence[NewJob]
    ) -> list[PushResult]:
        """Store jobs of which some depend on others or join a batch, with their edges, in one
        transaction; each is answered as stored (a job stored waiting, or released already when
        its dependencies had all completed). A dependency neither pushed here nor stored fails
        the push, which then stores nothing, as does a batch not found or committed. A jid of
        this push that another push inserted between this statement's snapshot and its insert
        is not marked as a dependency: the push is written again, and sees that job."""
        if unique := [i for i, j in enumerate(jobs) if j.unique]:
            raise InvalidRequest(
                "a unique job is pushed without depends_on or a batch, and in a request without "
                "jobs that have them",
                errors=[
                    {"loc": f"jobs.{i}.unique", "message": "in a request with depends_on or batch"}
                    for i in unique[:100]
                ],
            )
        edges = dependency_edges([(j.jid, s) for j, s in zip(jobs, specs, strict=True)])
        for attempt in range(UNIQUE_ATTEMPTS):
            try:
                inserted, rows = await self._write_dependent(jobs, edges, attempt == 0)
            except _Raced:
                continue
            break
        else:
            raise RuntimeError(f"a push with dependencies lost a race {UNIQUE_ATTEMPTS} times")
        results = [PushResult(job=rows[j.jid], created=j.jid in inserted) for j in jobs]
        self._hub.jobs_arrived(
            counts_by_queue(
                r.job["queue"] for r in results if r.created and r.job["state"] == "available"
            )
        )
        return results

    async def _write_dependent(
        self, jobs: Sequence[NewJob], edges: Sequence[DependencyEdge], first: bool
    ) -> tuple[set[str], dict[str, Row]]:
        """One transaction of ``_store_dependent``: the jids inserted, and every job as stored
        after the push (read in it, so each is answered as the push left it). A dependency
        missing from the first attempt is looked for again: an ack committed while the statement
        ran may have moved it to the kept jobs, past the statement's snapshot of them."""
        async with self._pool.acquire() as conn, conn.transaction():
            try:
                answer = await queries.push_dependent_jobs(conn, self._clock.now(), jobs, edges)
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name != "werk_jobs_pkey":
                    raise
                raise _Raced from exc  # a jid kept completed meanwhile: written again, left out
            if answer["missing"]:
                if first:
                    raise _Raced
                raise _not_found(jobs, edges, set(answer["missing"]))
            if len(answer["joined"]) < len(answer["batches"]):
                closed = sorted(set(answer["batches"]) - set(answer["joined"]))
                raise await batch_closed(conn, closed[0])
            inserted, marked = set(answer["inserted"]), set(answer["marked"])
            if any(e.dep not in marked and e.dep not in inserted for e in edges):
                raise _Raced  # rolls this transaction back
            rows = await queries.get_jobs(conn, [j.jid for j in jobs])
        return inserted, {r["jid"]: r for r in rows}

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
                await self._claim.hand_back(undelivered)
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

    async def get(self, jid: str) -> Row:
        row = await queries.get_job(self._pool, jid)
        if row is None:
            raise JobNotFound(f"no job with jid {jid!r} (completed jobs are deleted at ack)")
        (job,) = await with_dependencies(self._pool, [row], self._dependencies)
        if not job["dependents"]:
            return job
        return {
            **job,
            "dependent_edges": await queries.job_dependents(self._pool, jid, DEPENDENTS_SHOWN),
        }

    async def dependency_page(
        self, jid: str, after: str | None, limit: int
    ) -> tuple[list[Row], str | None]:
        """Up to ``limit`` dependencies of ``jid`` after the dep ``after``, with their results:
        as many as the budget of one answer holds, and at least one. Returns the page and the
        ``after`` of the next one (None: this was the last)."""
        rows = await queries.job_dependency_page(
            self._pool, jid, after, limit + 1, self._dependencies.results_bytes
        )
        if not rows and await queries.get_job(self._pool, jid) is None:
            raise JobNotFound(f"no job with jid {jid!r} (completed jobs are deleted at ack)")
        page: list[Row] = []
        for r in rows[:limit]:
            if not r["within"]:
                break
            page.append(r)
        return page, (page[-1]["dep"] if len(page) < len(rows) else None)


def _not_found(
    jobs: Sequence[NewJob], edges: Sequence[DependencyEdge], missing: set[str]
) -> DependencyNotFound:
    """The error for dependencies neither stored nor pushed, locating each."""
    names = ", ".join(repr(m) for m in sorted(missing)[:10])
    where = {j.jid: i for i, j in enumerate(jobs)}
    return DependencyNotFound(
        f"no job {names} is stored or in this push (completed jobs are deleted at ack unless kept)",
        errors=[
            {"loc": f"jobs.{where[e.jid]}.depends_on", "message": f"no job {e.dep!r}"}
            for e in edges
            if e.dep in missing
        ][:100],
    )


class _Raced(Exception):
    """A push with dependencies met a jid inserted meanwhile, or missed a dependency moved
    meanwhile: it is written again."""


def _new_jobs(specs: Sequence[JobPush]) -> list[NewJob]:
    """The jobs of one batch, jids generated where absent; a jid or a unique key twice is the
    caller's error."""
    fresh = iter(new_jids(sum(1 for s in specs if not s.jid)))
    jobs = [_to_new_job(s, s.jid or next(fresh)) for s in specs]
    seen: set[str] = set()
    keys: set[str] = set()
    refs: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.ref is not None:
            if spec.ref in refs:
                raise InvalidRequest(
                    f"ref {spec.ref!r} appears twice in the batch",
                    errors=[{"loc": f"jobs.{i}.ref", "message": "duplicate ref in batch"}],
                )
            refs.add(spec.ref)
    for i, job in enumerate(jobs):
        if job.jid in seen:
            raise InvalidRequest(
                f"jid {job.jid!r} appears twice in the batch",
                errors=[{"loc": f"jobs.{i}.jid", "message": "duplicate jid in batch"}],
            )
        seen.add(job.jid)
        if job.unique is not None:
            if job.unique.key in keys:
                raise InvalidRequest(
                    f"unique key {job.unique.key!r} appears twice in the batch",
                    errors=[
                        {"loc": f"jobs.{i}.unique", "message": "duplicate unique key in batch"}
                    ],
                )
            keys.add(job.unique.key)
    return jobs


def _to_new_job(spec: JobPush, jid: str) -> NewJob:
    """The job as it is written (``jid``: the spec's, or one minted for it)."""
    job = spec.new_job(jid)
    if spec.unique is not None:
        job.unique = unique_lock(spec, spec.unique)
    return job
