"""The statements that settle or extend an attempt name a job by jid and must find it through the
primary key, however many jobs are in flight and whatever the statistics say. Naming the state
(state = 'active') lets the planner walk werk_jobs_active_idx instead, over every active job,
which it does when the statistics were gathered while few jobs were active: with 50,000 jobs in
flight an ack then took 28-68 ms, a fail 24-25 and an extend 17-26, against 2.4-7 through the
key (one at a time, on a day the reference machine ran at half its usual speed). This sets up
that case (statistics
taken with nothing active, then many jobs claimed) and reads the plans, generic (what the job
pool's prepared statements use) and custom."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.helpers import explain
from werk.db.sql import sql

JOBS = 20_000
LEASE = "0b4f1a8e-9a3a-4a5e-8c1d-6f2b3c4d5e6f"

STATEMENTS = {
    "job_ack": f"NULL, '[\"inflight-1\"]', '[\"{LEASE}\"]', false, 0, '[]'",
    "job_extend": f"NULL, 'inflight-1', '{LEASE}', NULL, NULL, false",
    "job_fail": f"NULL, 'inflight-1', '{LEASE}', 'E', 'm', '{{}}', NULL, false, 0, NULL",
    "job_unclaim": f"'{{inflight-1}}', '{{{LEASE}}}'",
}


@pytest.fixture
async def many_in_flight(api: object, database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    await conn.execute(
        """
        INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
        SELECT 'inflight-' || g, 'noop', 'busy', '[]', 'available', now(), now(), now()
        FROM generate_series(1, $1) AS g
        """,
        JOBS,
    )
    await conn.execute("ANALYZE werk_jobs")  # nothing is active in the statistics
    await conn.execute(
        """
        UPDATE werk_jobs SET state = 'active', attempt = 1, lease = gen_random_uuid(),
                             lease_expires_at = now() + interval '30 minutes', wid = 'w'
        WHERE jid LIKE 'inflight-%' AND substr(jid, 10)::int % 4 <> 0
        """
    )
    yield conn
    await conn.close()


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("name", sorted(STATEMENTS))
async def test_a_lease_statement_finds_its_job_by_the_primary_key(
    many_in_flight: asyncpg.Connection, name: str, plan_mode: str
) -> None:
    plan = await explain(
        many_in_flight, sql(name), STATEMENTS[name], plan_mode=plan_mode, analyze=False
    )
    assert "werk_jobs_pkey" in plan, plan
    assert "werk_jobs_active_idx" not in plan, plan
    assert "Seq Scan on werk_jobs" not in plan, plan
