"""Pushing jobs: what a push stores, which waiting fetch a due job is stored reserved for, and
what the producer is answered; and reading a job back."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
import orjson

from werk.db import queries
from werk.db.queries import Executor
from werk.domain.clock import Clock
from werk.domain.jids import new_jid, new_jids
from werk.domain.job import JobSpec, NewJob, PushResult
from werk.errors import InvalidRequest, JobNotFound
from werk.services.claim import ClaimService
from werk.services.wakeup import Waiter, WakeHub, counts_by_queue
from werk.services.writers import PushWriter

log = logging.getLogger(__name__)

Row = Mapping[str, Any]


class PushService:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, hub: WakeHub, claim: ClaimService) -> None:
        self._pool = pool
        self._clock = clock
        self._hub = hub
        self._claim = claim
        self._singles = PushWriter(pool, self._store)

    async def close(self) -> None:
        """Give the held connection back (before the pool closes)."""
        await self._singles.close()

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
        return dict(row)


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
        keep_result_for=spec.keep_result_for or None,
    )
