"""One typed wrapper per SQL file. Callers pass a pool or a connection; nothing here decides."""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any, Literal

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from werk.db.held import HeldConnection
from werk.db.sql import sql
from werk.domain.job import UNSETTLED_STATES, DependencyEdge, NewJob
from werk.domain.times import TIME_MAX

Executor = asyncpg.Pool | asyncpg.Connection | PoolConnectionProxy | HeldConnection

# Counter rows are spread over this many shards so concurrent commits do not wait on one row lock.
COUNTER_SHARDS = 16


def counter_shard() -> int:
    return int(random.random() * COUNTER_SHARDS)  # half the cost of randrange


PushAnswer = Literal["rows", "decided", "jids"]


def _column(values: list[Any]) -> tuple[list[Any], Any]:
    """One column of a batch for job_push.sql's part many: ([], v) when every job holds v (the
    statement fills it in), else (values, None)."""
    first = values[0]
    return ([], first) if values.count(first) == len(values) else (values, None)


async def push_jobs(
    db: Executor,
    now: datetime | None,
    jobs: Sequence[NewJob],
    handoffs: Sequence[str | None] | None,
    *,
    answer: PushAnswer = "rows",
) -> list[Any]:
    """Insert the jobs whose jid is new; returns per inserted job its row (``answer`` "rows"),
    the columns the statement decided ("decided": jid, queue, state, at, created_at,
    enqueued_at, expires_at; for jobs handed to no fetch) or its jid, queue and state ("jids").
    ``handoffs``: per job, the worker id of a fetch waiting for it, which gets it reserved at
    once (when due, not paused); None: no job is handed off. Jobs with a unique lock go to
    ``push_unique_jobs``.

    The jids are first taken to be new, which spares PostgreSQL the duplicate check per job; when
    one exists, that statement fails having changed nothing, and the push is written again
    skipping existing jids. Jids kept completed are looked up unless the server minted every
    jid (``NewJob.minted``)."""
    answer_part = f"job_push.{answer}"
    taken = "job_push.minted" if all(j.minted for j in jobs) else "job_push.checked"
    if handoffs is None:
        handoffs = [None] * len(jobs)
    if len(jobs) == 1:
        (j,), (wid,) = jobs, handoffs
        shape = "job_push.one"
        args: tuple[Any, ...] = (
            now, j.jid, j.jobtype, j.queue, j.args, j.priority, j.reserve_for, j.retry,
            j.backtrace, j.custom, j.at, counter_shard(), wid, j.expires_at, j.expires_in,
            j.keep_result_for,
        )  # fmt: skip
    else:
        shape = "job_push.many"
        args = (*_many(now, jobs, handoffs), *_rare(jobs))
    try:
        return await db.fetch(push_sql(shape, "job_push.new", answer_part, taken), *args)
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name != "werk_jobs_pkey":
            raise
    return await db.fetch(push_sql(shape, "job_push.dedupe", answer_part, taken), *args)


@cache
def push_sql(jobs: str, conflict: str, answer: str, taken: str) -> str:
    """job_push.sql for jobs without unique keys, as push_jobs sends it; cached by position,
    which every push looks up more cheaply than sql()'s keywords. Only the push written again
    skipping existing jids looks for the jids kept completed before its insert: the first finds
    them by the check after it."""
    kept = "job_push.unkept" if conflict == "job_push.dedupe" else "job_push.any"
    tally = "job_push.each" if jobs == "job_push.one" else "job_push.all"
    return sql(
        "job_push", jobs=jobs, conflict=conflict, answer=answer, release="job_push.hold",
        tally=tally, kept=kept, taken=taken,
    )  # fmt: skip


def _many(
    now: datetime | None, jobs: Sequence[NewJob], handoffs: Sequence[str | None]
) -> tuple[Any, ...]:
    """The parameters $1..$23 of job_push.sql's part many (and keyed)."""
    columns = [
        _column([j.jobtype for j in jobs]),
        _column([j.queue for j in jobs]),
        _column([j.args for j in jobs]),
        _column([j.priority for j in jobs]),
        _column([j.reserve_for for j in jobs]),
        _column([j.retry for j in jobs]),
        _column([j.backtrace for j in jobs]),
        _column([j.custom for j in jobs]),
        _column([j.at for j in jobs]),
    ]
    wids = _column(list(handoffs))
    return (
        now, [j.jid for j in jobs], *(c[0] for c in columns), counter_shard(), wids[0],
        *(c[1] for c in columns), wids[1],
    )  # fmt: skip


def _rare(jobs: Sequence[NewJob]) -> tuple[list[Any], list[Any], list[Any]]:
    """The columns most pushes leave empty, each an empty array when no job uses it (unnest
    pads it with NULLs): expiry ($24, $25) and keep_result_for ($26)."""
    expiring = any(j.expires_at is not None or j.expires_in is not None for j in jobs)
    kept = any(j.keep_result_for is not None for j in jobs)
    return (
        [j.expires_at for j in jobs] if expiring else [],
        [j.expires_in for j in jobs] if expiring else [],
        [j.keep_result_for for j in jobs] if kept else [],
    )


async def push_unique_jobs(db: Executor, now: datetime | None, jobs: Sequence[NewJob]) -> list[Any]:
    """Insert the jobs whose jid is new and whose unique key (if any) is free, in one statement;
    a key another job holds answers with that holder, which a push with on_conflict replace may
    have changed. Returns whole rows, each with ``created``: false for a holder. Keys whose time
    bound passed, and keys an active job holds that a replace push takes over, are released by
    the same statement. Unique keys must differ within ``jobs``. A jid pushed concurrently
    by another transaction fails the statement (UniqueViolationError on werk_jobs_pkey)."""
    locks = [j.unique for j in jobs]
    args = (
        *_many(now, jobs, [None] * len(jobs)),
        *_rare(jobs),
        [u.key if u else None for u in locks],
        [u.seconds if u else None for u in locks],
        [u.spec if u else None for u in locks],
    )
    return await db.fetch(
        sql(
            "job_push",
            jobs="job_push.keyed",
            release="job_push.release",
            kept="job_push.any",
            taken="job_push.checked",
            conflict="job_push.holder",
            tally="job_push.created",
            answer="job_push.met",
        ),
        *args,
    )


async def fetch_jobs(
    db: Executor, now: datetime | None, queues: Sequence[str], slots: Sequence[str]
) -> list[Any]:
    """Claim up to ``len(slots)`` jobs, the n-th for worker ``slots[n]``; each row carries its
    1-based ``slot``. The leases are drawn here, 16 random bytes per slot in one call."""
    return await db.fetch(sql("job_fetch"), now, list(queues), list(slots), new_leases(len(slots)))


# Byte maps that stamp a random UUID's version (4) and variant (RFC 4122) bits, as
# gen_random_uuid() does: a lease is a version 4 UUID like any other.
_VERSION_4 = bytes((b & 0x0F) | 0x40 for b in range(256))
_VARIANT_RFC_4122 = bytes((b & 0x3F) | 0x80 for b in range(256))


def new_leases(n: int) -> bytes:
    """``n`` random version 4 UUIDs, 16 bytes each, end to end (a few C calls for all of them)."""
    raw = bytearray(secrets.token_bytes(16 * n))
    raw[6::16] = raw[6::16].translate(_VERSION_4)
    raw[8::16] = raw[8::16].translate(_VARIANT_RFC_4122)
    return bytes(raw)


async def unclaim_jobs(
    db: Executor, jids: Sequence[str], leases: Sequence[str], *, relock: bool
) -> list[str]:
    """Undo the given leases (jobs fetched but never delivered); returns the queue of each job
    made available again. With ``relock``, a job locked unique until start takes its key back
    where no other job holds it (raises UniqueViolationError when a push took it meanwhile)."""
    rows = await db.fetch(sql("job_unclaim"), list(jids), list(leases), relock)
    return [r["queue"] for r in rows]


async def ack_jobs(
    db: Executor,
    now: datetime | None,
    leases: Mapping[str, str],
    *,
    keep_completed: bool,
    by_worker: Mapping[str, str] | None = None,
    results: Mapping[str, Any] | None = None,
) -> tuple[set[str], set[str]]:
    """Complete each job named in ``leases`` whose current lease is the one given (in canonical
    form: the statement compares leases as text), and each in ``by_worker`` held by the worker
    given (Faktory's ACK names no lease), storing the result ``results`` maps its jid to on the
    jobs kept. Returns the jids completed and those of them kept as completed jobs. A jid is
    named once: a caller with two leases for one job sends two statements.

    The jobs deleted at ack are completed first (job_ack.sql's part deleted); the others named,
    if any, are written again with part any, which keeps them."""
    # The mappings go to jsonb parameters: the pool's codec writes each with one orjson call.
    by_worker = by_worker or {}
    done: set[str] = set()
    if not keep_completed:
        row: Any = await db.fetchrow(
            ack_sql(keeping=False), now, leases, False, counter_shard(), by_worker
        )
        done = set(row["done"])
        if len(done) == len(leases) + len(by_worker):
            return done, set()
        leases = {jid: lease for jid, lease in leases.items() if jid not in done}
        by_worker = {jid: wid for jid, wid in by_worker.items() if jid not in done}
    args = (now, leases, keep_completed, counter_shard(), by_worker, results or None)
    row = await db.fetchrow(ack_sql(keeping=True), *args)
    return done | set(row["done"]), set(row["kept"])


def ack_sql(*, keeping: bool) -> str:
    """job_ack.sql completing only the jobs deleted at ack, or (``keeping``) any job."""
    return sql("job_ack", settles="job_ack.any" if keeping else "job_ack.deleted")


async def fail_job(
    db: Executor,
    now: datetime | None,
    jid: str,
    lease: str | None,
    *,
    errtype: str,
    message: str,
    backtrace: Sequence[str],
    retry_in: float | None,
    no_retry: bool,
    wid: str | None = None,
) -> Any | None:
    """The attempt is named by its lease, or (lease None) by the worker holding it."""
    args = (
        now, jid, lease, errtype, message, list(backtrace), retry_in, no_retry, counter_shard(),
        wid, TIME_MAX,
    )  # fmt: skip
    return await db.fetchrow(
        sql("job_fail", discarded="job_discard", noted="job_failed_noted"), *args
    )


async def extend_job(
    db: Executor,
    now: datetime | None,
    jid: str,
    lease: str,
    *,
    reserve_for: int | None,
    progress_json: str | None,
    set_progress: bool,
) -> datetime | None:
    value: datetime | None = await db.fetchval(
        sql("job_extend"), now, jid, lease, reserve_for, progress_json, set_progress
    )
    return value


async def push_dependent_jobs(
    db: Executor,
    now: datetime | None,
    jobs: Sequence[NewJob],
    edges: Sequence[DependencyEdge],
) -> Any:
    """Insert the jobs whose jid is new with their dependency edges (job_push_deps.sql); returns
    the jids inserted, the dependencies marked (stored before) and those missing (then nothing
    is written), the batches the jobs inserted join and those of them joined (open)."""
    fields = ("jid", "jobtype", "queue", "args", "priority", "reserve_for", "retry", "backtrace",
              "custom", "at", "expires_at", "expires_in", "keep_result_for")  # fmt: skip
    columns = [[getattr(j, f) for j in jobs] for f in fields]
    return await db.fetchrow(
        sql("job_push_deps"),
        now,
        *columns,
        counter_shard(),
        [e.jid for e in edges],
        [e.dep for e in edges],
        [e.on_failure.value for e in edges],
        [e.ref for e in edges],
        [j.batch for j in jobs] if any(j.batch for j in jobs) else [],
    )


async def job_dependencies(db: Executor, jids: Sequence[str], budget: int, most: int) -> list[Any]:
    """The first ``most`` dependency edges of the jobs ``jids``, their results up to ``budget``
    bytes in all (job_dependencies.sql)."""
    return await db.fetch(sql("job_dependencies"), list(jids), budget, most)


async def job_dependency_page(
    db: Executor, jid: str, after: str | None, limit: int, budget: int
) -> list[Any]:
    """At most ``limit`` dependency edges of ``jid`` after the dep ``after``, each marked
    ``within`` while their results add up to at most ``budget`` bytes (job_dependency_page.sql)."""
    return await db.fetch(sql("job_dependency_page"), jid, after, limit, budget)


async def job_dependents(db: Executor, jid: str, limit: int) -> list[Any]:
    """The jobs depending on ``jid``, at most ``limit`` (job_dependents.sql)."""
    return await db.fetch(sql("job_dependents"), jid, limit)


async def get_job(db: Executor, jid: str) -> Any | None:
    return await db.fetchrow(sql("job_get"), jid)


async def get_jobs(db: Executor, jids: Sequence[str]) -> list[Any]:
    return await db.fetch(sql("job_get_many"), list(jids))


async def jobs_settled(db: Executor, jids: Sequence[str]) -> list[str]:
    """Those of ``jids`` whose job is settled (in none of UNSETTLED_STATES) or not stored."""
    rows = await db.fetch(sql("job_settled"), list(jids), sorted(UNSETTLED_STATES))
    return [r["jid"] for r in rows]


async def job_exists(db: Executor, jid: str) -> bool:
    return bool(await db.fetchval(sql("job_exists"), jid))


async def promote_due(db: Executor, now: datetime | None, limit: int) -> list[str]:
    rows = await db.fetch(sql("job_promote"), now, limit)
    return [r["queue"] for r in rows]


async def expire_due(db: Executor, now: datetime | None, limit: int) -> list[str]:
    """Expire waiting jobs whose expires_at has come; returns their jids."""
    rows = await db.fetch(sql("job_expire"), now, limit, counter_shard())
    return [r["jid"] for r in rows]


async def release_orphans(
    db: Executor,
    now: datetime | None,
    *,
    max_orphans: int,
    worker_timeout: float,
    limit: int,
) -> list[Any]:
    return await db.fetch(
        sql("job_orphans_release", discarded="job_discard", noted="job_failed_noted"),
        now,
        max_orphans,
        worker_timeout,
        limit,
        counter_shard(),
        TIME_MAX,
    )


async def beat_worker(
    db: Executor,
    now: datetime | None,
    *,
    wid: str,
    hostname: str,
    pid: int | None,
    labels: Sequence[str],
    rss_kb: int | None,
    reported_state: str | None,
) -> str:
    state: str = await db.fetchval(
        sql("worker_beat"), now, wid, hostname, pid, list(labels), rss_kb, reported_state
    )
    return state


async def info(db: Executor, now: datetime | None) -> Any:
    return await db.fetchrow(
        sql("info", pairs="queue_state_pairs", counts="queue_state_counts"), now, None
    )


async def queues_with_available(db: Executor, queues: Sequence[str]) -> list[str]:
    rows = await db.fetch(sql("queues_with_available"), list(queues))
    return [r["name"] for r in rows]


async def other_listeners(db: Executor, own_pid: int, application_name: str) -> int:
    n: int = await db.fetchval(sql("listeners_other"), own_pid, application_name)
    return n


async def notify_queues(db: Executor, queues: Sequence[str]) -> None:
    await db.execute(sql("notify"), ",".join(queues))


async def ping(db: Executor) -> None:
    await db.execute(sql("ping"))


async def prune_finished(
    db: Executor,
    now: datetime | None,
    *,
    dead_retention: float,
    dead_max: int,
    completed_retention: float,
    limit: int,
) -> int:
    rows = await db.fetch(
        sql("job_prune"), now, dead_retention, dead_max, completed_retention, limit
    )
    return len(rows)


async def prune_gone_workers(db: Executor, now: datetime | None, *, older_than: float) -> None:
    await db.execute(sql("worker_prune"), now, older_than)


# "werk" + 1: the lock that keeps two nodes from vacuuming the job table at once.
VACUUM_LOCK_KEY = 0x7765726C


VacuumPass = Literal["whole", "heap", "skip"]


async def vacuum_jobs(
    pool: asyncpg.Pool,
    *,
    plan: Callable[[int, float], VacuumPass] | None = None,
    pooled: bool = False,
) -> tuple[int, VacuumPass] | None:
    """Vacuum the job table and werk_settlings unless another node is at it; returns None when
    another node is (through a pooler this is never known), else the job table's changed rows
    counter (jobs_changed.sql) and what the pass did.

    ``plan(changed, rows)`` decides from the counter and the table's rows whether this pass
    vacuums the job table whole (heap and indexes), its heap only, or skips; without it every
    pass is whole.

    ``pooled`` (a transaction pooler in front): VACUUM cannot run in a transaction, and the
    session lock that keeps the nodes apart would be taken on one server session and released
    on another, so it stays held; there a VACUUM that finds the table being vacuumed skips it
    (SKIP_LOCKED), which keeps the nodes apart as well, at the price of a line in PostgreSQL's
    log for each skip."""
    async with pool.acquire() as conn:
        if not pooled and not await conn.fetchval(sql("lock_try"), VACUUM_LOCK_KEY):
            return None
        try:
            row = await conn.fetchrow(sql("jobs_changed"))
            changed = int(row["changed"]) if row is not None else 0
            what: VacuumPass = (
                "whole" if plan is None or row is None else plan(changed, float(row["rows"]))
            )
            if what != "skip":
                await conn.execute(sql("jobs_vacuum" if what == "whole" else "jobs_vacuum_heap"))
                await conn.execute(sql("settlings_vacuum"))
        finally:
            if not pooled:
                await conn.execute(sql("lock_release"), VACUUM_LOCK_KEY)
        return changed, what
