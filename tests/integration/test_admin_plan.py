"""The operators' queries (queue list, info, job pages, worker list, bulk actions) must stay index
scans on a backlog: a scan of werk_jobs would make every dashboard page, /metrics scrape and
/v1/info read the whole table. Active jobs are in no admin index (each claim would write to it):
these queries reach them through werk_jobs_active_idx, and the answers must still count and order
them with the rest.

Plans are read with EXPLAIN EXECUTE of a prepared statement, custom and generic: an EXPLAIN with
bound parameters plans them as constants, so it only ever shows the custom plan, and the admin
pool lets PostgreSQL switch a prepared statement to its generic plan when that looks as cheap."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

import asyncpg
import pytest

from tests.support.helpers import assert_reads_at_most
from werk.db import admin_queries, queries
from werk.db.admin_queries import JobFilter
from werk.db.pool import connect
from werk.db.sql import sql

BACKLOG = 40_000
ACTIVE = BACKLOG // 20
PAIRS = 4 * 5  # at most: queues times states other than active
NOW = datetime(2026, 1, 2, tzinfo=UTC)
PAGE = 50

# Most jobs are available; one in 20 is active (held by worker-0 .. worker-6), others dead,
# scheduled or completed. Three jobs share each created_at, so pages split ties on jid; the jobs
# of werk_jobs have three priorities. The queue "rare" holds a few jobs of every kind among many
# of "busy" and "other".
FILL = """
    WITH x AS (
        SELECT 'backlog-' || g AS jid,
               CASE WHEN g % 500 IN (0, 1, 3, 7) THEN 'rare'
                    WHEN g % 3 = 0 THEN 'other' ELSE 'busy' END AS queue,
               c, s
        FROM (SELECT g,
                     timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => g / 3) AS c,
                     CASE WHEN g % 20 = 0 THEN 'active'
                          WHEN g % 20 IN (1, 2) THEN 'dead'
                          WHEN g % 20 = 3 THEN 'scheduled'
                          WHEN g % 20 = 4 THEN 'completed'
                          ELSE 'available' END::werk_job_state AS s
              FROM generate_series(1, $1) AS g) AS n
    ),
    live AS (
        INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at,
                               enqueued_at, finished_at, failed_at, errtype, lease,
                               lease_expires_at, wid, priority)
        SELECT jid, 'noop', queue, '[]', s, c, c, c,
               CASE WHEN s = 'dead' THEN c END,
               CASE WHEN s = 'dead' THEN c END,
               CASE WHEN s = 'dead' THEN 'Boom' END,
               CASE WHEN s = 'active' THEN gen_random_uuid() END,
               CASE WHEN s = 'active' THEN c + interval '1 hour' END,
               CASE WHEN s = 'active' THEN 'worker-' || (substr(jid, 9)::int) % 7 END,
               (substr(jid, 9)::int / 7) % 3 - 1
        FROM x WHERE s <> 'completed'
    )
    INSERT INTO werk_completed_jobs (jid, jobtype, queue, args, state, run_at, created_at,
                                     enqueued_at, finished_at, keep_until)
    SELECT jid, 'noop', queue, '[]', s, c, c, c, c, c
    FROM x WHERE s = 'completed'
"""
WORKERS = """
    INSERT INTO werk_workers (wid, started_at, last_beat_at, gone_at)
    SELECT wid, $1::timestamptz, $1::timestamptz, CASE WHEN wid = 'worker-gone' THEN $1 END
    FROM unnest(ARRAY['worker-0', 'worker-1', 'worker-2', 'worker-3', 'worker-4', 'worker-5',
                      'worker-6', 'worker-idle', 'worker-gone']) AS wid
"""


@pytest.fixture
async def backlog(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await connect(database_url)
    await conn.execute(FILL, BACKLOG)
    await conn.execute(WORKERS, NOW)
    await conn.execute("INSERT INTO werk_queues (name, paused) VALUES ('idle', true)")
    # The job table as the server's vacuum pass (jobs_vacuum.sql) keeps it, and a table written
    # once per row, which autovacuum keeps all-visible.
    await conn.execute("VACUUM ANALYZE werk_jobs")
    await conn.execute("VACUUM ANALYZE werk_completed_jobs")
    await conn.execute("ANALYZE werk_workers")
    try:
        yield conn
    finally:
        await conn.close()


def statement(name: str) -> str:
    """Statement ``name`` as the server sends it (its parts filled in where it has any)."""
    if name in ("newest", "oldest"):  # the job pages
        return admin_queries.job_list_sql(newest_first=name == "newest")
    if name in ("behind", "ahead"):  # the pages of available jobs
        return admin_queries.job_list_available_sql(last_first=name == "behind")
    if name == "admin_job_act":
        return admin_queries.job_act_sql()
    if name in ("info", "queue_list"):
        return sql(name, pairs="queue_state_pairs", counts="queue_state_counts")
    return sql(name)


async def plans(conn: asyncpg.Connection, name: str, *literals: str) -> list[str]:
    """The custom and the generic plan of statement ``name`` run with these SQL literals, with
    what each node returned (EXPLAIN ANALYZE, rolled back: a bulk action really changes jobs)."""
    await conn.execute(f"PREPARE checked AS {statement(name)}")
    try:
        found = []
        for mode in ("force_custom_plan", "force_generic_plan"):
            transaction = conn.transaction()
            await transaction.start()
            try:
                await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                rows = await conn.fetch(
                    "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
                    f"EXECUTE checked({', '.join(literals)})"
                )
            finally:
                await transaction.rollback()
            found.append("\n".join(r[0] for r in rows))
        return found
    finally:
        await conn.execute("DEALLOCATE checked")


def assert_indexed(plan: str, *indexes: str) -> None:
    assert "Seq Scan on werk_jobs" not in plan, plan
    for index in indexes:
        assert re.search(rf"(Scan using|Bitmap Index Scan on) {index} ", plan), plan


def lit(value: str | None) -> str:
    return "NULL" if value is None else f"'{value}'"


async def three_pages(
    page: Callable[..., Awaitable[list[Any]]], after: Any, cursor: Callable[[Any], Any]
) -> list[Any]:
    """Three full pages in turn, each read after the cursor of the last row of the one before."""
    rows: list[Any] = []
    for _ in range(3):
        got = await page(after=after)
        assert len(got) == PAGE
        rows += got
        after = cursor(got[-1])
    return rows


async def counts_per_queue(conn: asyncpg.Connection) -> dict[str, dict[str, int]]:
    rows = await conn.fetch(
        "SELECT queue, state::text, count(*) AS n FROM werk_stored_jobs GROUP BY 1, 2"
    )
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for r in rows:
        counts[r["queue"]][r["state"]] = r["n"]
    return counts


async def oldest_available(conn: asyncpg.Connection) -> dict[str, datetime]:
    rows = await conn.fetch(
        "SELECT queue, min(enqueued_at) AS oldest FROM werk_jobs WHERE state = 'available' "
        "GROUP BY queue"
    )
    return {r["queue"]: r["oldest"] for r in rows}


async def test_queue_list_counts_every_state_from_the_indexes(backlog: asyncpg.Connection) -> None:
    for queue in (None, "busy", "rare", "idle"):
        for plan in await plans(backlog, "queue_list", "NULL", lit(queue)):
            assert_indexed(plan, "werk_jobs_active_idx")
            if queue != "idle":
                assert_indexed(plan, "werk_jobs_queue_state_idx")
            if queue in ("rare", "idle"):  # reads the active jobs and that queue's, no others
                assert_reads_at_most(plan, ACTIVE)

    expected = await counts_per_queue(backlog)
    assert expected["busy"]["active"] > 0 and expected["rare"]["active"] > 0
    oldest = await oldest_available(backlog)
    listed = await admin_queries.list_queues(backlog, NOW)
    assert [q.name for q in listed] == ["busy", "idle", "other", "rare"]
    for q in listed:
        assert q.counts == expected.get(q.name, {}), q
        assert q.size == expected.get(q.name, {}).get("available", 0), q
        if q.name in oldest:
            assert q.latency_seconds == (NOW - oldest[q.name]).total_seconds(), q
    assert {q.name: q.paused for q in listed} == {
        "busy": False, "idle": True, "other": False, "rare": False
    }  # fmt: skip
    assert await admin_queries.list_queues(backlog, NOW, "rare") == [listed[3]]
    assert await admin_queries.list_queues(backlog, NOW, "idle") == [listed[1]]


async def test_info_counts_every_state_from_the_indexes(backlog: asyncpg.Connection) -> None:
    for plan in await plans(backlog, "info", "NULL", "NULL"):
        assert_indexed(plan, "werk_jobs_queue_state_idx", "werk_jobs_active_idx")

    per_queue = await counts_per_queue(backlog)
    states = Counter[str]()
    for per_state in per_queue.values():
        states.update(per_state)
    assert states["active"] == ACTIVE
    oldest = await oldest_available(backlog)
    row = await queries.info(backlog, NOW)
    assert row["states"] == dict(states)
    sizes = {q["name"]: q["size"] for q in row["queues"]}
    assert sizes == {name: per_queue[name].get("available", 0) for name in sizes}
    assert set(sizes) == {"busy", "idle", "other", "rare"}
    for q in row["queues"]:
        if q["name"] in oldest:
            assert q["latency_seconds"] == (NOW - oldest[q["name"]]).total_seconds(), q


@pytest.mark.parametrize("newest_first", [True, False])
async def test_job_pages_merge_active_and_other_jobs_from_the_indexes(
    backlog: asyncpg.Connection, newest_first: bool
) -> None:
    name = "newest" if newest_first else "oldest"
    order = "DESC" if newest_first else "ASC"
    for state in (None, "active", "dead"):
        for queue in (None, "busy"):
            for cursor in (("NULL", "NULL"), ("'2026-01-01 01:51:06+00'", "'backlog-20000'")):
                args = (lit(state), lit(queue), "NULL", "NULL", "NULL", *cursor, str(PAGE + 1))
                for plan in await plans(backlog, name, *args):
                    assert_indexed(plan)
                    # a page per (queue, state) pair at most, and the active jobs
                    assert_reads_at_most(plan, PAIRS * (PAGE + 1) + ACTIVE)
                    if state != "dead":
                        assert_indexed(plan, "werk_jobs_active_idx")
                    if state != "active":
                        assert_indexed(plan, "werk_jobs_queue_state_idx")

            expected = await backlog.fetch(
                "SELECT jid, state::text FROM werk_stored_jobs"
                " WHERE ($1::werk_job_state IS NULL OR state = $1) AND state <> 'available'"
                " AND ($2::text IS NULL OR queue = $2)"
                f" ORDER BY created_at {order}, jid {order} LIMIT {3 * PAGE}",
                state,
                queue,
            )
            rows = await three_pages(
                partial(
                    admin_queries.list_jobs,
                    backlog,
                    JobFilter(state=state, queue=queue),
                    newest_first=newest_first,
                    limit=PAGE,
                ),
                None,
                lambda r: (r["created_at"], r["jid"]),
            )
            listed = [(r["jid"], r["state"]) for r in rows]
            assert listed == [(r["jid"], r["state"]) for r in expected], (state, queue)
            if state is None:
                assert {"active", "completed", "dead"} <= {s for _, s in listed}


@pytest.mark.parametrize("last_first", [True, False])
async def test_available_job_pages_read_the_claim_index_in_claim_order(
    backlog: asyncpg.Connection, last_first: bool
) -> None:
    name = "behind" if last_first else "ahead"
    order = "priority, seq DESC" if last_first else "priority DESC, seq"
    for state in (None, "available"):
        for queue in (None, "busy"):
            for cursor in (("NULL", "NULL"), ("'0'", "'20000'")):
                args = (lit(state), lit(queue), "NULL", "NULL", "NULL", *cursor, str(PAGE + 1))
                for plan in await plans(backlog, name, *args):
                    assert_indexed(plan, "werk_jobs_claim_idx")
                    # per queue: its heads, then two pages (the cursor's priority, the rest)
                    assert_reads_at_most(plan, 3 * (3 + 2 * (PAGE + 1)))

            every = await backlog.fetch(
                "SELECT jid, priority, seq FROM werk_jobs"
                " WHERE state = 'available' AND ($1::text IS NULL OR queue = $1)"
                f" ORDER BY {order}",
                queue,
            )
            # From the first page, and across the last change of priority.
            crossing = [r["priority"] for r in every].index(every[-1]["priority"]) - 75
            for start in (0, crossing):
                after = (
                    None if start == 0 else (every[start - 1]["priority"], every[start - 1]["seq"])
                )
                rows = await three_pages(
                    partial(
                        admin_queries.list_available_jobs,
                        backlog,
                        JobFilter(state=state, queue=queue),
                        last_first=last_first,
                        limit=PAGE,
                    ),
                    after,
                    lambda r: (r["priority"], r["seq"]),
                )
                listed = [r["jid"] for r in rows]
                expected = every[start : start + 3 * PAGE]
                assert listed == [r["jid"] for r in expected], (state, queue, start)
                if start:
                    assert len({r["priority"] for r in expected}) == 2
    none = await admin_queries.list_available_jobs(
        backlog, JobFilter(state="dead"), last_first=last_first, after=None, limit=PAGE
    )
    assert none == []


async def test_worker_list_counts_busy_jobs_through_the_active_index(
    backlog: asyncpg.Connection,
) -> None:
    for include_gone, wid in (("false", None), ("true", None), ("false", "worker-3")):
        for plan in await plans(backlog, "worker_list", include_gone, lit(wid)):
            assert_indexed(plan, "werk_jobs_active_idx")
            (scan,) = [line for line in plan.splitlines() if "werk_jobs_active_idx" in line]
            assert "loops=1)" in scan, plan  # once, not once per worker

    held = await backlog.fetch(
        "SELECT wid, count(*) AS n FROM werk_jobs WHERE state = 'active' GROUP BY wid"
    )
    busy = {r["wid"]: r["n"] for r in held}
    assert len(busy) == 7 and min(busy.values()) > 0
    live = await admin_queries.list_workers(backlog, include_gone=False)
    assert {w["wid"]: w["busy"] for w in live} == busy | {"worker-idle": 0}
    every = await admin_queries.list_workers(backlog, include_gone=True)
    assert {w["wid"]: w["busy"] for w in every} == busy | {"worker-idle": 0, "worker-gone": 0}
    (one,) = await admin_queries.list_workers(backlog, include_gone=False, wid="worker-3")
    assert one["busy"] == busy["worker-3"]


async def test_bulk_actions_on_a_queue_read_it_through_the_indexes(
    backlog: asyncpg.Connection,
) -> None:
    # Only the custom plan: with every filter optional, the generic plan of this statement
    # scans the table and costs far more, so PostgreSQL keeps planning it per call. The action
    # is a constant there: only its own write runs.
    writes = {"retry": "retried", "kill": "stopped", "cancel": "stopped", "delete": "deleted"}
    for action in ("cancel", "kill", "delete", "retry"):
        args = ("NULL", "'rare'", "NULL", "NULL", "NULL", "NULL", "1000", "NULL", f"'{action}'")
        custom, _ = await plans(backlog, "admin_job_act", *args)
        if action == "retry":  # dead and scheduled jobs only: no active ones
            assert_indexed(custom, "werk_jobs_queue_state_idx")
            assert "werk_jobs_active_idx" not in custom, custom
        else:  # available jobs too, in claim order
            assert_indexed(
                custom, "werk_jobs_queue_state_idx", "werk_jobs_active_idx", "werk_jobs_claim_idx"
            )
        assert_reads_at_most(custom, ACTIVE)
        for cte in set(writes.values()):
            if cte != writes[action]:  # a write, then the Result that never runs it
                assert re.search(rf"CTE {cte}\n.*\n.*\n\s+One-Time Filter: false", custom), custom

    rare = (await counts_per_queue(backlog))["rare"]
    assert rare["active"] > 0
    cancelled = await admin_queries.act_on_jobs(
        backlog, "cancel", NOW, JobFilter(queue="rare"), jids=None, limit=1000
    )
    assert len(cancelled) == rare["active"] + rare["available"] + rare["scheduled"]


@pytest.mark.parametrize("newest_first", [True, False])
async def test_a_search_reads_the_matching_jobs_from_the_words_index(
    backlog: asyncpg.Connection, newest_first: bool
) -> None:
    """A page searched by q reads the jobs whose words match from werk_jobs_words_idx, custom
    and generic plan alike: not the whole backlog filtered row by row. Every job that is not
    available or active gets a customer among 4,999 in its args; the search names one."""
    for table in ("werk_jobs", "werk_completed_jobs"):
        await backlog.execute(
            f"UPDATE {table} SET args = jsonb_build_array(jsonb_build_object("
            "'customer', 'cust' || substr(jid, 9)::int % 4999, 'note', 'nightly run'))"
            " WHERE state NOT IN ('available', 'active')"
        )
        await backlog.execute(f"ANALYZE {table}")
    name = "newest" if newest_first else "oldest"
    for state in ("dead", "completed", None):
        args = (lit(state), "NULL", "NULL", "'cust1005'", "NULL", "NULL", "NULL", str(PAGE + 1))
        for plan in await plans(backlog, name, *args):
            if state != "completed":
                assert_indexed(plan, "werk_jobs_words_idx")
            if state != "dead":
                assert_indexed(plan, "werk_completed_jobs_words_idx")
            if state is not None:  # (available jobs, outside the words index, are walked)
                assert_reads_at_most(plan, PAIRS * (PAGE + 1) + ACTIVE)
    expected = await backlog.fetch(
        'SELECT jid FROM werk_stored_jobs WHERE args @> \'[{"customer": "cust1005"}]\''
        f" ORDER BY created_at {'DESC' if newest_first else 'ASC'}, jid"
    )
    assert 0 < len(expected) < PAGE
    rows = await admin_queries.list_jobs(
        backlog,
        JobFilter(words="cust1005"),
        newest_first=newest_first,
        after=None,
        limit=PAGE,
    )
    assert [r["jid"] for r in rows] == [r["jid"] for r in expected]
