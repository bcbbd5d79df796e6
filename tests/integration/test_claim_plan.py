"""The claim statement must stay an index scan on werk_jobs_claim_idx that stops after the jobs it
wants, however large the backlog: a plan change (a seq scan, another index) would turn every fetch
into a scan of the table. Checked with the custom plan and with the generic plan a prepared
statement settles on (EXPLAIN EXECUTE of a prepared statement: an EXPLAIN with bound parameters
plans them as constants, so it would only ever show the custom plan)."""

from __future__ import annotations

import asyncpg
import pytest

from werk.db.sql import sql

BACKLOG = 100_000


@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
async def test_claim_uses_the_partial_claim_index_on_a_backlog(
    api: object, database_url: str, plan_mode: str
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        # The measured queue holds most of the backlog; another queue and dead jobs surround it.
        await conn.execute(
            """
            INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at,
                                   enqueued_at, finished_at)
            SELECT 'backlog-' || g, 'noop', CASE WHEN g % 4 = 0 THEN 'other' ELSE 'busy' END,
                   '[]', CASE WHEN g % 5 = 0 THEN 'dead' ELSE 'available' END::werk_job_state,
                   now(), now(), now(), CASE WHEN g % 5 = 0 THEN now() END
            FROM generate_series(1, $1) AS g
            """,
            BACKLOG,
        )
        await conn.execute("ANALYZE werk_jobs")
        await conn.execute("PREPARE claim AS " + sql("job_fetch"))
        transaction = conn.transaction()
        await transaction.start()
        try:  # EXPLAIN ANALYZE really claims: roll it back
            await conn.execute(f"SET LOCAL plan_cache_mode = {plan_mode}")
            rows = await conn.fetch(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "
                "EXECUTE claim(NULL, '{busy}', array_fill('w'::text, ARRAY[100]), "
                "decode(repeat('ab', 1600), 'hex'))"
            )
        finally:
            await transaction.rollback()
    finally:
        await conn.close()
    plan = "\n".join(r[0] for r in rows)
    assert "Seq Scan on werk_jobs" not in plan, plan
    (scan,) = [line for line in plan.splitlines() if "werk_jobs_claim_idx" in line]
    assert "Index Scan using werk_jobs_claim_idx" in scan, plan
    assert "rows=100 " in scan, plan  # it stopped after the 100 it wanted
