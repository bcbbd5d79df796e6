"""The statements that settle or extend an attempt name a job by jid and must find it through the
primary key, however many jobs are in flight and whatever the statistics say. Two ways the
statistics mislead the planner, both seen on the reference machine:

- Taken while every job waited, they say no job is active. Naming the state (state = 'active')
  then let the planner walk werk_jobs_active_idx over every active job: with 50,000 jobs in
  flight an ack took 28-68 ms, a fail 24-25 and an extend 17-26, against 2.4-7 by the key.
- Taken before VACUUM emptied the table (truncated or not), then a burst of jobs claimed: a
  statement joining its ack list to werk_jobs was planned as a scan of the table estimated at
  one job in flight, inside a loop over the list; acks of 1,000 took 0.34-1.77 s.

Each state is set up here with autovacuum off for the table (so nothing refreshes the statistics
meanwhile), and the plans are read, generic (what the job pool's prepared statements use) and
custom, executed in a transaction rolled back: no node may read more than a few rows."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.helpers import assert_reads_at_most, explain
from werk.db.sql import sql

LEASE = "0b4f1a8e-9a3a-4a5e-8c1d-6f2b3c4d5e6f"

ACK = f"NULL, '{{\"inflight-1\": \"{LEASE}\"}}', false, 0, '{{}}'"
# name: (statement as werk.db.queries composes it, its arguments)
STATEMENTS = {
    "job_ack deleted": (sql("job_ack", settles="job_ack.deleted"), ACK),
    "job_ack any": (sql("job_ack", settles="job_ack.any"), f"{ACK}, '{{}}'"),
    "job_extend": (sql("job_extend"), f"NULL, 'inflight-1', '{LEASE}', NULL, NULL, false"),
    "job_fail": (
        sql("job_fail", discarded="job_discard", noted="job_failed_noted"),
        f"NULL, 'inflight-1', '{LEASE}', 'E', 'm', '{{}}', NULL, false, 0, NULL, "
        "'9999-12-31 23:59:59.999999+00'",
    ),
    "job_unclaim": (sql("job_unclaim"), f"'{{inflight-1}}', '{{{LEASE}}}', true"),
}

# name: (jobs when the statistics are taken, VACUUM of an emptied table (None: not emptied),
#        jobs in the burst afterwards, twelfths of them claimed)
STATES = {
    "analyzed-9": (20_000, None, 0, 9),
    "analyzed-2": (20_000, None, 0, 2),
    "emptied-2": (20_000, "VACUUM (TRUNCATE true) werk_jobs", 3_000, 2),
    "untruncated-2": (20_000, "VACUUM (TRUNCATE false) werk_jobs", 3_000, 2),
}

INSERT = """
    INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
    SELECT 'inflight-' || g, 'noop', 'busy', '[]', 'available', now(), now(), now()
    FROM generate_series(1, $1) AS g
"""


@pytest.fixture(params=sorted(STATES))
async def misleading_statistics(
    request: pytest.FixtureRequest, api: object, database_url: str
) -> AsyncIterator[asyncpg.Connection]:
    analyzed, vacuum, burst, twelfths = STATES[request.param]
    conn = await asyncpg.connect(database_url)
    await conn.execute("ALTER TABLE werk_jobs SET (autovacuum_enabled = false)")
    await conn.execute(INSERT, analyzed)
    await conn.execute("ANALYZE werk_jobs")  # every job waits, in the statistics
    if vacuum is not None:
        await conn.execute("DELETE FROM werk_jobs")
        await conn.execute(vacuum)
        await conn.execute(INSERT, burst)
    await conn.execute(
        """
        UPDATE werk_jobs SET state = 'active', attempt = 1, lease = gen_random_uuid(),
                             lease_expires_at = now() + interval '30 minutes', wid = 'w'
        WHERE substr(jid, 10)::int % 12 < $1
        """,
        twelfths,
    )
    yield conn
    await conn.close()


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("name", sorted(STATEMENTS))
async def test_a_lease_statement_finds_its_job_by_the_primary_key(
    misleading_statistics: asyncpg.Connection, name: str, plan_mode: str
) -> None:
    statement, args = STATEMENTS[name]
    plan = await explain(
        misleading_statistics,
        statement,
        args,
        plan_mode=plan_mode,
        analyze=True,
    )
    assert "werk_jobs_pkey" in plan, plan
    assert "werk_jobs_active_idx" not in plan, plan
    assert "Seq Scan on werk_jobs" not in plan, plan
    assert_reads_at_most(plan, 10)
