"""Settling a job with dependents walks the dependency graph one key lookup at a time, at
commit, whatever PostgreSQL estimates. Statistics taken over many edges of a wide fan-out made it
estimate hundreds of edges per lookup and hash-join every step against the whole of
werk_job_deps instead (a sequential scan, and once those were ruled out, the primary key read
whole): a job failing at the head of a chain read every edge stored once per level of the chain,
and an ack of a job with dependents read every edge before the first unsettled one. The server
plans its job traffic's statements once, for any parameters (generic plans), as these tests do.
Counted with the reads of the settling transaction itself (pg_stat_xact_user_tables), after such
statistics, over a backlog of unsettled edges, waiting jobs and kept results."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from werk.db.admin_queries import JobFilter, job_act_sql

DEPS = 200  # dependencies of each kind below
FAN_OUT = 100  # dependents of each
CHAIN = 20
# Rows a settling of the chain's head may read per table: its walk and what it changes, a few
# dozen rows, against the tens of thousands of rows of each table.
MOST_READ = 1000
TABLES = ("werk_job_deps", "werk_jobs", "werk_dep_results")


@pytest.fixture
async def wide_edges(api: object, database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """Settled edges kept (dead dependents keep theirs for months), sorting before any jid Werk
    makes, half of them naming a kept result; and waiting jobs with an unsettled edge each."""
    conn = await asyncpg.connect(database_url)
    await conn.execute(
        """
        INSERT INTO werk_dep_results (dep, completed_at, result, refs)
        SELECT '0old-dep-' || d, now(), '{"n": 1}', $2 / 2
        FROM generate_series(1, $1) AS d
        """,
        DEPS,
        FAN_OUT,
    )
    await conn.execute(
        """
        INSERT INTO werk_job_deps (dep, jid, on_failure, outcome, settled_at, result_at)
        SELECT '0old-dep-' || d, 'old-job-' || d || '-' || k, 'fail', 'completed', r.completed_at,
               CASE WHEN k % 2 = 0 THEN r.completed_at END
        FROM generate_series(1, $1) AS d, generate_series(1, $2) AS k, werk_dep_results r
        WHERE r.dep = '0old-dep-' || d
        """,
        DEPS,
        FAN_OUT,
    )
    await conn.execute(
        """
        WITH waiting AS (
            INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at,
                                   waiting_for, dependencies)
            SELECT 'wait-job-' || d || '-' || k, 't', 'backlog', '[]', 'waiting', now(), now(),
                   1, true
            FROM generate_series(1, $1) AS d, generate_series(1, $2) AS k
            RETURNING jid
        )
        INSERT INTO werk_job_deps (dep, jid, on_failure)
        SELECT 'wait-dep-' || split_part(jid, '-', 3), jid, 'fail' FROM waiting
        """,
        DEPS,
        FAN_OUT,
    )
    await conn.execute("ANALYZE werk_job_deps, werk_jobs, werk_dep_results")
    try:
        yield conn
    finally:
        await conn.close()


async def leased_head_of_chain(api) -> tuple[list[str], str]:
    jobs = [{"ref": "r0", "jobtype": "t", "queue": "chain"}]
    jobs += [
        {"ref": f"r{i}", "jobtype": "t", "queue": "chain", "depends_on": [f"r{i - 1}"]}
        for i in range(1, CHAIN)
    ]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201, r.text
    jids = r.json()["jids"]
    r = await api.http.post("/v1/fetch", json={"queues": ["chain"], "wid": "w1"})
    (job,) = r.json()["jobs"]
    assert job["jid"] == jids[0]
    return jids, job["lease"]


async def settled_reading(
    conn: asyncpg.Connection, statement: str, *args: object, generic: bool = True
) -> dict:
    """Runs ``statement`` and the settling its commit would run, planned as the server plans
    them (``generic``: as the job traffic's, else as an operator's); answers per table what
    they read: sequential scans, and rows fetched by index. The reads of this connection's
    earlier transactions are flushed first: until then PostgreSQL counts them with the current
    one's."""
    await conn.execute("SELECT pg_stat_force_next_flush()")
    async with conn.transaction():
        if generic:
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        await conn.execute(statement, *args)
        await conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
        rows = await conn.fetch(
            "SELECT relname, seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables"
            " WHERE relname = ANY($1)",
            list(TABLES),
        )
    return {r["relname"]: (r["seq_scan"], r["idx_tup_fetch"]) for r in rows}


def assert_looked_up(reads: dict) -> None:
    for table, (seq_scans, fetched) in reads.items():
        assert seq_scans == 0, (table, reads)
        assert fetched < MOST_READ, (table, reads)


@pytest.mark.parametrize(
    ("settle", "states"),
    [
        # the whole chain below the head goes dead, level by level
        ("SELECT werk.fail($1, $2, '{\"retry\": false}')", {"dead"}),
        # the next job of the chain is released, the rest wait
        ("SELECT werk.ack($1, $2, '{\"n\": 2}')", {"available", "waiting"}),
    ],
)
async def test_settling_looks_up_the_edges_it_follows(api, wide_edges, settle, states):
    conn = wide_edges
    jids, lease = await leased_head_of_chain(api)
    assert_looked_up(await settled_reading(conn, settle, jids[0], lease))
    rows = await conn.fetch("SELECT state::text FROM werk_jobs WHERE jid = ANY($1)", jids[1:])
    assert {r["state"] for r in rows} == states


async def test_deleting_a_dependent_looks_up_the_result_it_named(api, wide_edges):
    conn = wide_edges
    jids, lease = await leased_head_of_chain(api)
    await conn.execute("SELECT werk.ack($1, $2, '{\"n\": 2}')", jids[0], lease)
    assert await conn.fetchval("SELECT refs FROM werk_dep_results WHERE dep = $1", jids[0]) == 1

    reads = await settled_reading(
        conn,
        job_act_sql(),
        *JobFilter().args(),
        [jids[1]],
        1,
        None,
        "delete",
        generic=False,
    )

    assert_looked_up(reads)
    assert await conn.fetchval("SELECT count(*) FROM werk_dep_results WHERE dep = $1", jids[0]) == 0


async def test_the_settling_is_never_compiled(api, wide_edges):
    """PostgreSQL compiles (JIT) each statement estimated above jit_above_cost, at every
    execution; the settling's estimates pass it with a large table of edges, where compiling
    took most of a second per settled job. The server's own connections run without JIT, but
    not the application's own (the SQL interface) or those behind a pooler: the settling turns
    it off for itself. Here every statement would be compiled but the settling's."""
    conn = wide_edges
    settings = await conn.fetch(
        "SELECT proconfig FROM pg_proc WHERE proname = ANY($1)",
        ["werk_settlings_settle", "werk_dependencies_settle"],
    )
    assert len(settings) == 2 and all("jit=off" in r["proconfig"] for r in settings)
    if not await conn.fetchval("SELECT pg_jit_available()"):
        return  # a PostgreSQL built without JIT (the embedded one) compiles nothing anyway
    jids, lease = await leased_head_of_chain(api)
    plans: list[str] = []
    conn.add_log_listener(lambda _conn, message: plans.append(message.message))
    async with conn.transaction():
        await conn.execute("LOAD 'auto_explain'")
        for setting in (
            "jit = on",
            "jit_above_cost = 0",
            "auto_explain.log_min_duration = 0",
            "auto_explain.log_nested_statements = on",
            "auto_explain.log_analyze = on",
            "auto_explain.log_level = notice",
        ):
            await conn.execute(f"SET LOCAL {setting}")
        await conn.execute("SELECT werk.fail($1, $2, '{\"retry\": false}')", jids[0], lease)
        await conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
    walks = [p for p in plans if "reached(jid, doomed)" in p or "doomed(jid, fate, cause)" in p]
    assert walks, plans  # both functions ran, and were explained
    assert not [p for p in walks if "JIT:" in p]
    assert [p for p in plans if "JIT:" in p]  # the rest was compiled: this PostgreSQL can
