"""Small conveniences shared by the tests."""

from __future__ import annotations

import re
from typing import Any

import asyncpg


async def sql(database_url: str, query: str, *args: Any) -> list[Any]:
    """Run one statement against the test's database (for arranging and checking state)."""
    conn = await asyncpg.connect(database_url)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def count_jobs(database_url: str) -> int:
    """Jobs stored, in any state: kept completed ones too (werk_completed_jobs)."""
    rows = await sql(database_url, "SELECT count(*) AS n FROM werk_stored_jobs")
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


def assert_reads_at_most(plan: str, rows: int) -> None:
    """No node of the plan returns or filters out more than ``rows`` rows over all its loops: an
    index bound the plan cannot use (a parameter a generic plan only filters on) reads more."""
    loops = 1
    for line in plan.splitlines():
        if found := re.search(r"actual rows=(\d+) loops=(\d+)", line):
            loops = int(found[2])
            assert int(found[1]) * loops <= rows, plan
        if found := re.search(r"Rows Removed by (?:Join )?Filter: (\d+)", line):
            assert int(found[1]) * loops <= rows, plan


def as_pushed(job: dict[str, Any]) -> dict[str, Any]:
    """A job as read (GET /v1/jobs/{jid}) as a push answers it: its retention, expiry and unique
    lock only when it has them, its result and completion only once it completed."""
    brief = {k: v for k, v in job.items() if k not in _BRIEF}
    for key in ("expires_at", "unique"):
        if job[key] is not None:
            brief[key] = job[key]
    if job["keep_result_for"]:
        brief["keep_result_for"] = job["keep_result_for"]
    if job["state"] == "completed":
        brief["result"], brief["completed_at"] = job["result"], job["completed_at"]
    return brief


_BRIEF = {"keep_result_for", "expires_at", "unique", "result", "completed_at", "dependents"}
