"""Small conveniences shared by the tests."""

from __future__ import annotations

from typing import Any

import asyncpg

from bench.scenarios import Context
from bench.target import Target


async def sql(database_url: str, query: str, *args: Any) -> list[Any]:
    """Run one statement against the test's database (for arranging and checking state)."""
    conn = await asyncpg.connect(database_url)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def count_jobs(database_url: str) -> int:
    rows = await sql(database_url, "SELECT count(*) AS n FROM werk_jobs")
    return int(rows[0]["n"])


async def explain(
    conn: asyncpg.Connection, statement: str, literals: str, *, plan_mode: str, analyze: bool
) -> str:
    """The plan of ``statement`` prepared, as the server's pools send it, and executed with these
    SQL literals; ``plan_mode`` is force_generic_plan (what a prepared statement settles on) or
    force_custom_plan. With ``analyze`` it runs, in a transaction rolled back, and each node
    shows the buffers it read."""
    options = "ANALYZE, BUFFERS, COSTS OFF, TIMING OFF" if analyze else "COSTS OFF"
    await conn.execute(f"PREPARE explained AS {statement}")
    transaction = conn.transaction()
    await transaction.start()
    try:
        await conn.execute(f"SET LOCAL plan_cache_mode = {plan_mode}")
        rows = await conn.fetch(f"EXPLAIN ({options}) EXECUTE explained({literals})")
    finally:
        await transaction.rollback()
        await conn.execute("DEALLOCATE explained")
    return "\n".join(r[0] for r in rows)


def bench_context(database_url: str, jobs: int, url: str = "http://127.0.0.1:9") -> Context:
    """A bench Context for small runs in tests (no waiting for a quiet machine, no sampling)."""
    return Context(
        target=Target(url=url, database_url=database_url),
        jobs=jobs,
        repeat=1,
        backlog=0,
        dead=0,
        in_flight=0,
        churn=0,
        churn_first=0,
        latency_jobs=0,
        latency_interval=0.01,
        idle_polls=0,
        idle_settle=0.0,
        idle_window=0.0,
        push_clients=[1],
        batch_sizes=[10],
        batch_clients=1,
        work_workers_1=1,
        work_workers_100=1,
        churn_producers=1,
        churn_workers=1,
        sample_waits=False,
    )
