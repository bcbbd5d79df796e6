"""The upkeep statements every node runs (once a second: release orphaned leases, promote due
jobs; every 30th pass: prune what retention lets go) must read what they change, not every
active, scheduled or kept job. Each compared its index column with the clock of a CTE, which
PostgreSQL can only apply as a filter: the scan ran over the whole index whenever fewer rows were
due than the batch. The orphan release also looked for the jobs of lost workers on every pass,
which no index can answer. This reads their plans (EXPLAIN ANALYZE in a rolled-back transaction)
with many jobs held, many scheduled for later, many completed jobs kept with their result and
many batches finished, none of them due."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.helpers import assert_reads_at_most, explain
from werk.db.sql import sql

JOBS = 20_000

STATEMENTS = {
    # now, max_orphans, worker_timeout, limit, shard, latest retry time
    "job_orphans_release": "NULL, 3, 60, 1000, 0, '9999-12-31 23:59:59.999999+00'",
    # now, limit
    "job_promote": "NULL, 1000",
    # now, dead retention, dead kept at most, completed retention, limit
    "job_prune": "NULL, 604800, 10000, 0, 1000",
    # now, older than, limit
    "batch_prune": "NULL, 604800, 1000",
}
# The parts a statement is composed with (as werk.db.queries does).
PARTS = {"job_orphans_release": {"discarded": "job_discard", "noted": "job_failed_noted"}}


@pytest.fixture
async def held_and_scheduled(api: object, database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    await conn.execute(
        """
        INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at,
                               attempt, lease, lease_expires_at, wid)
        SELECT 'held-job-' || g, 'noop', 'busy', '[]', 'active', now(), now(), now(),
               1, gen_random_uuid(), now() + interval '30 minutes', 'w'
        FROM generate_series(1, $1) AS g
        """,
        JOBS,
    )
    await conn.execute(
        """
        INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at)
        SELECT 'later-job-' || g, 'noop', 'busy', '[]', 'scheduled',
               now() + interval '1 hour' + g * interval '1 second', now()
        FROM generate_series(1, $1) AS g
        """,
        JOBS,
    )
    await conn.execute(
        """
        INSERT INTO werk_completed_jobs (jid, jobtype, queue, args, state, run_at, created_at,
                                         enqueued_at, attempt, finished_at, keep_result_for,
                                         keep_until)
        SELECT 'kept-job-' || g, 'noop', 'busy', '[]', 'completed', now(), now(), now(), 1,
               now(), 3600, now() + interval '1 hour'
        FROM generate_series(1, $1) AS g
        """,
        JOBS,
    )
    await conn.execute(
        """
        INSERT INTO werk_batches (bid, created_at, committed, committed_at, completed_at)
        SELECT 'finished-batch-' || g, now(), true, now(), now()
        FROM generate_series(1, $1) AS g
        """,
        JOBS,
    )
    await conn.execute("ANALYZE werk_jobs, werk_completed_jobs, werk_batches")
    yield conn
    await conn.close()


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize("name", sorted(STATEMENTS))
async def test_an_upkeep_pass_with_nothing_due_reads_next_to_nothing(
    held_and_scheduled: asyncpg.Connection, name: str, plan_mode: str
) -> None:
    plan = await explain(
        held_and_scheduled,
        sql(name, **PARTS.get(name, {})),
        STATEMENTS[name],
        plan_mode=plan_mode,
        analyze=True,
    )
    # A node's figure includes its children's: the largest is the most the statement read
    # (planning, which reads the catalogs the first time, is reported apart at the end).
    executed = plan.split("\nPlanning")[0]
    read = max((int(n) for n in re.findall(r"shared hit=(\d+)", executed)), default=0)
    assert read < 100, plan  # before: every held or scheduled job, hundreds of pages


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_prune_pass_reads_the_kept_jobs_it_deletes_not_all_of_them(
    held_and_scheduled: asyncpg.Connection, plan_mode: str
) -> None:
    """A generic plan cannot know how many kept jobs are due, and joined with them it scanned
    the whole table to delete a few."""
    conn = held_and_scheduled
    await conn.execute(
        "UPDATE werk_completed_jobs SET keep_until = now() - interval '1 minute' "
        "WHERE jid IN (SELECT jid FROM werk_completed_jobs ORDER BY md5(jid) LIMIT 100)"
    )
    await conn.execute("ANALYZE werk_completed_jobs")
    plan = await explain(
        conn, sql("job_prune"), STATEMENTS["job_prune"], plan_mode=plan_mode, analyze=True
    )
    assert re.search(r"Delete on werk_completed_jobs .*actual rows=100 ", plan), plan
    assert_reads_at_most(plan, 1000)
