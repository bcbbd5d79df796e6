"""Settling jobs: ack, fail and extend, by lease (the HTTP API) or by worker (Faktory's wire
protocol, whose ACK and FAIL carry a jid and no lease)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn

import asyncpg
import orjson

from werk.db import queries
from werk.domain.clock import Clock
from werk.domain.job import FailOutcome, FailResult
from werk.errors import JobNotFound, LeaseLost, ResultTooLarge
from werk.services.wakeup import WakeHub
from werk.services.writers import Acked, AckWriter

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
    canonical already (as Werk hands them out), one regex over them all says so instead of a
    check per lease. As many commas as separators: no lease holds one."""
    joined = ",".join([lease for _, lease in acks])
    if joined.count(",") == len(acks) - 1 and _CANONICAL_UUIDS.fullmatch(joined):
        return list(acks)
    return [(jid, lid) for jid, lease in acks if (lid := _lease_uuid(lease)) is not None]


def _json(result: Any, jid: str, max_bytes: int) -> orjson.Fragment:
    """``result`` as JSON, or ResultTooLarge over the size limit."""
    text = orjson.dumps(result)
    if len(text) > max_bytes:
        raise ResultTooLarge(
            f"the result for job {jid!r} is {len(text)} bytes of JSON; this server stores at "
            f"most {max_bytes} (WERK_MAX_RESULT_BYTES); nothing was changed"
        )
    return orjson.Fragment(text)


class SettleService:
    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        hub: WakeHub,
        *,
        keep_completed: bool,
        max_result_bytes: int,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._hub = hub
        self._keep_completed = keep_completed
        self._max_result_bytes = max_result_bytes
        self._acks = AckWriter(pool, clock, keep_completed=keep_completed)

    async def close(self) -> None:
        """Give the held connection back (before the pool closes)."""
        await self._acks.close()

    async def ack(self, jid: str, lease: str, result: Any = None) -> None:
        """Complete the attempt ``lease`` holds, storing ``result`` (parsed JSON; None: none) if
        the job is kept."""
        lease_id = _lease_uuid(lease)
        results = self._encoded({(jid, lease): result}) if result is not None else None
        if lease_id is not None:
            (acked,) = await self._acks.submit((((jid, lease_id),), results))
            if acked is not None:
                self._settled((jid,), (acked,))
                return
        await self._raise_not_current(jid)

    async def ack_many(
        self,
        acks: Sequence[tuple[str, str]],
        results: Mapping[tuple[str, str], Any] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Returns (acked jids, jids whose lease was not current). ``results``: per (jid,
        lease) of ``acks``, the result to store (parsed JSON) if that lease is current."""
        encoded = self._encoded(results) if results else None
        valid = _with_lease_uuids(acks)
        outcomes = await self._acks.submit((valid, encoded)) if valid else []
        acked = [jid for (jid, _), ok in zip(valid, outcomes, strict=True) if ok is not None]
        done = set(acked)
        if len(done) < len(acked):  # the same jid and lease given twice: say it once
            acked = list(dict.fromkeys(acked))
        if acked:
            self._settled([jid for jid, _ in valid], outcomes)
        return acked, [jid for jid, _ in acks if jid not in done]

    def _encoded(self, results: Mapping[tuple[str, str], Any]) -> dict[tuple[str, str], Any]:
        """The results as JSON, keyed by (jid, lease in canonical form), each checked against
        the size limit before anything is written."""
        encoded = {}
        for (jid, lease), result in results.items():
            if result is not None:
                text = _json(result, jid, self._max_result_bytes)
                if (lease_id := _lease_uuid(lease)) is not None:
                    encoded[(jid, lease_id)] = text
        return encoded

    def _settled(self, jids: Sequence[str], outcomes: Sequence[Acked]) -> None:
        """Wake whoever waits for the results of the jobs completed (None: not completed)."""
        kept = True in outcomes  # (one scan in C; usually no job is kept)
        if not kept and not self._hub.waiting_for_results:
            return
        self._hub.jobs_settled(
            (jid for jid, ok in zip(jids, outcomes, strict=True) if ok is False),
            readable=[jid for jid, ok in zip(jids, outcomes, strict=True) if ok] if kept else (),
        )

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
        return self._failed(jid, row)

    def _failed(self, jid: str, row: Any) -> FailResult:
        """The failure's answer; a job it settled (dead, discarded) wakes its result waiters."""
        result = _fail_result(jid, row)
        if result.outcome in (FailOutcome.DEAD, FailOutcome.DISCARDED):
            self._hub.jobs_settled((), readable=(jid,))
        return result

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
        return expires

    async def _raise_not_current(self, jid: str) -> NoReturn:
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

    async def ack_by_worker(self, jid: str, wid: str, result: Any = None) -> bool:
        """Complete the attempt worker ``wid`` holds on ``jid``, storing ``result`` (parsed JSON;
        None: none) if the job is kept. False (and nothing changed) when the job is not active
        under that worker: unknown, settled, expired, or re-reserved."""
        acked, kept = await queries.ack_jobs(
            self._pool,
            self._clock.now(),
            {},
            keep_completed=self._keep_completed,
            by_worker={jid: wid},
            results={jid: _json(result, jid, self._max_result_bytes)}
            if result is not None
            else None,
        )
        if jid in acked:
            self._settled((jid,), (jid in kept,))
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
        return self._failed(jid, row)


_OUTCOMES = {
    "discard": FailOutcome.DISCARDED,
    "dead": FailOutcome.DEAD,
    "retry": FailOutcome.SCHEDULED,
}


def _fail_result(jid: str, row: Any) -> FailResult:
    outcome = _OUTCOMES[row["outcome"]]
    next_at = row["run_at"] if outcome is FailOutcome.SCHEDULED else None
    return FailResult(jid=jid, outcome=outcome, next_at=next_at)
