"""The `floor` scenario: what the server's own SQL costs with no HTTP and no server in between.

The statements are the server's (server/werk/db/sql/*.sql), sent by asyncpg from this process on
two connections (one per core), against the server's database while the server idles. If these
rates sit below a target, no HTTP front end can reach it with this schema on this machine: the
gap between a floor rate and the matching HTTP scenario is what the server costs.

It also measures the idle round trips the latency scenario is made of, at that scenario's pace
(one every ``latency_interval``): ``SELECT 1``, a one-job push (insert + commit), and
``GET /livez`` through HTTP. On a virtual machine whose cores sleep between requests each hop
costs several times what it costs back to back, and a push is at least one HTTP hop plus one
commit.

It pushes one job at a time with the server's statement straight to PostgreSQL, one hop where a
push over HTTP has two. And it sets `werk serve` beside the least server a push over HTTP can
have on Werk's stack (bench/least_server.py), one push at a time, from the lean client and from
the SDK's `Client.push`: what that server reaches is the most any server on this stack reaches
here with Werk's table, for each client, and the gap is what the rest of Werk's work for a push
costs.

The ``lean`` variants run the same statements against a stripped copy of the job table (schema
``floor_lean``, found first on the connections' search path): only the indexes a queue cannot do
without (the jid key, the claim order, scheduled promotion, lease expiry) and no check
constraints. The gap between the two is what the admin indexes and the invariants the schema
enforces cost per job.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import orjson

from bench.httpclient import Connection
from bench.scenarios import Context, pct, timed
from werk.db import queries
from werk.db.sql import sql
from werk.domain.jids import new_jids

QUEUE = "bench-floor"
CONNECTIONS = 2
# the round trips idle_round_trips times, in the order they are reported
ROUND_TRIPS = ("select_1", "push_one_job_sql", "http_livez")
LEAN = "floor_lean"
# The lean copy: werk_jobs' columns and defaults, the four indexes the job traffic needs, no checks.
LEAN_SCHEMA = f"""
DROP SCHEMA IF EXISTS {LEAN} CASCADE;
CREATE SCHEMA {LEAN};
CREATE TABLE {LEAN}.werk_jobs (LIKE public.werk_jobs INCLUDING DEFAULTS) WITH (fillfactor = 70);
DO $$
DECLARE c record;
BEGIN  -- the columns whose type is a domain (migration 0007) take its base type: no checks
    FOR c IN
        SELECT a.attname, format_type(t.typbasetype, t.typtypmod) AS base, l.collname
        FROM pg_attribute a
        JOIN pg_type t ON t.oid = a.atttypid AND t.typtype = 'd'
        LEFT JOIN pg_collation l ON l.oid = a.attcollation
        WHERE a.attrelid = '{LEAN}.werk_jobs'::regclass
    LOOP
        EXECUTE format('ALTER TABLE {LEAN}.werk_jobs ALTER COLUMN %I TYPE %s', c.attname, c.base)
            || CASE WHEN c.collname IS NULL THEN '' ELSE format(' COLLATE %I', c.collname) END;
    END LOOP;
END $$;
ALTER TABLE {LEAN}.werk_jobs ADD PRIMARY KEY (jid);
CREATE INDEX ON {LEAN}.werk_jobs (queue, priority DESC, seq) WHERE state = 'available';
CREATE INDEX ON {LEAN}.werk_jobs (run_at) WHERE state = 'scheduled';
CREATE INDEX ON {LEAN}.werk_jobs (lease_expires_at) WHERE state = 'active';
"""


def _push_sql(jobs: str) -> str:
    """job_push.sql with its jobs as ``jobs`` (part one or many) answering with what it decided
    per inserted job, as the server sends it when no fetch waits for the jobs and it minted
    their jids."""
    return queries.push_sql(
        f"job_push.{jobs}", "job_push.new", "job_push.decided", "job_push.minted"
    )


def _push_args(n: int) -> list[Any]:
    """A batch as the server sends the bench's bodies: only the jids differ between jobs, so
    every other column travels as one value (job_push.sql, part many)."""
    jids = new_jids(n)  # the server's (time-ordered)
    return [None, jids, *[[]] * 9, 0, [],
            "noop", QUEUE, "[]", 0, 1800, 25, 0, "{}", None, None, [], [], []]  # fmt: skip


def _push_one_args() -> list[Any]:
    return [None, secrets.token_hex(12), "noop", QUEUE, "[]", 0, 1800, 25, 0, "{}", None, 0, None,
            None, None, None]  # fmt: skip


async def _connect(ctx: Context, lean: bool = False) -> asyncpg.Connection:
    assert ctx.target.database_url is not None
    # planned as the server's job-traffic pool plans them (werk.db.pool, plan_once)
    settings = {"application_name": "werk-bench", "plan_cache_mode": "force_generic_plan"}
    if lean:
        settings["search_path"] = f"{LEAN}, public"
    return await asyncpg.connect(ctx.target.database_url, server_settings=settings)


@contextlib.asynccontextmanager
async def _tables(ctx: Context, lean: bool) -> AsyncIterator[str]:
    """Yields the job table the statements will reach (the lean copy only while it exists)."""
    if not lean:
        yield "public.werk_jobs"
        return
    async with ctx.db() as db:
        await db.c.execute(LEAN_SCHEMA)
    try:
        yield f"{LEAN}.werk_jobs"
    finally:
        async with ctx.db() as db:
            await db.c.execute(f"DROP SCHEMA {LEAN} CASCADE")


async def _measure(
    ctx: Context,
    work: Callable[[asyncpg.Connection], Awaitable[int]],
    lean: bool,
    connections: int = CONNECTIONS,
) -> dict[str, Any]:
    """Runs ``work`` on each connection at once, under the CPU meter. The connections are open
    before and after the meter reads, so their backends' CPU is counted."""
    conns = [await _connect(ctx, lean) for _ in range(connections)]

    async def run() -> int:
        return sum(await asyncio.gather(*(work(c) for c in conns)))

    try:
        return await timed(ctx, run)
    finally:
        for c in conns:
            await c.close()


async def push_batches(ctx: Context, *, lean: bool, batch: int = 1000) -> dict[str, Any]:
    """job_push.sql with ``batch`` jobs per statement, ``ctx.jobs`` jobs over two connections."""
    statement = _push_sql("many")
    per_connection = max(ctx.jobs // CONNECTIONS // batch, 1)

    async def work(conn: asyncpg.Connection) -> int:
        for _ in range(per_connection):
            await conn.fetch(statement, *_push_args(batch))
        return per_connection * batch

    async with _tables(ctx, lean):
        return await _measure(ctx, work, lean)


async def push_singly(ctx: Context) -> dict[str, Any]:
    """job_push.sql with one job per statement, ``ctx.jobs`` of them one at a time on one
    connection: a single push with PostgreSQL one hop away, as a queue whose producers write to
    PostgreSQL themselves has it."""
    statement = _push_sql("one")

    async def work(conn: asyncpg.Connection) -> int:
        for _ in range(ctx.jobs):
            await conn.fetch(statement, *_push_one_args())
        return ctx.jobs

    return await _measure(ctx, work, False, connections=1)


async def claim_and_ack(ctx: Context, *, lean: bool, count: int = 100) -> dict[str, Any]:
    """job_fetch.sql claiming ``count`` then job_ack.sql acking them, on two connections, over
    ``ctx.jobs`` jobs seeded beforehand."""
    fetch, ack = sql("job_fetch"), queries.ack_sql(keeping=False)

    async def work(conn: asyncpg.Connection) -> int:
        done = 0
        # the leases drawn as the server draws them (werk.db.queries.fetch_jobs)
        while rows := await conn.fetch(
            fetch, None, [QUEUE], ["floor"] * count, queries.new_leases(count)
        ):
            # jid -> lease as JSON, one orjson call, as the server's codec writes it
            leases = orjson.dumps({r["jid"]: str(r["lease"]) for r in rows}).decode()
            await conn.fetch(ack, None, leases, False, 0, "{}")
            done += len(rows)
        return done

    async with _tables(ctx, lean) as table:
        async with ctx.db() as db:
            await db.c.execute(
                f"INSERT INTO {table} (jid, jobtype, queue, args, state, run_at, created_at, "
                "enqueued_at) SELECT 'floor-' || g || '-' || md5(g::text), 'noop', $2, '[]', "
                "'available', now(), now(), now() FROM generate_series(1, $1) AS g",
                ctx.jobs,
                QUEUE,
            )
            await db.c.execute(f"VACUUM ANALYZE {table}")
        return await _measure(ctx, work, lean)


async def idle_round_trips(ctx: Context, samples: int = 300) -> dict[str, Any]:
    """p50/p99 of single round trips spaced ``latency_interval`` apart."""
    gap = ctx.latency_interval
    conn = await _connect(ctx)
    http = Connection(ctx.target.host, ctx.target.port)
    await http.connect()
    push = _push_sql("one")

    async def measure(once: Callable[[], Awaitable[Any]]) -> dict[str, float]:
        times = []
        for _ in range(samples):
            await asyncio.sleep(gap)
            t0 = time.perf_counter()
            await once()
            times.append(time.perf_counter() - t0)
        return {"p50_ms": round(1e3 * pct(times, 50), 3), "p99_ms": round(1e3 * pct(times, 99), 3)}

    try:
        return {
            "interval_ms": gap * 1e3,
            "select_1": await measure(lambda: conn.fetchval("SELECT 1")),
            "push_one_job_sql": await measure(lambda: conn.fetch(push, *_push_one_args())),
            "http_livez": await measure(lambda: http.request("GET", "/livez")),
        }
    finally:
        http.close()
        await conn.close()
