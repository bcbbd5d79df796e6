"""Settling a job with dependents walks the dependency graph one edge lookup at a time, at
commit. Statistics taken over many edges of a wide fan-out (each dependency with hundreds of
dependents) made PostgreSQL estimate hundreds of edges per lookup and hash-join every step
against the whole of werk_job_deps instead: a job failing at the head of a chain of 1,000
dependents read every edge ever stored a few thousand times (37 s with 150,000 edges), and every
ack of a job with dependents read them all at least once. Counted here with the scans of the
settling transaction itself (pg_stat_xact_user_tables), after such statistics."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

DEPS = 200  # settled dependencies kept with their edges (dead dependents are kept for months)
FAN_OUT = 100  # dependents of each
CHAIN = 20


@pytest.fixture
async def wide_edges(api: object, database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    await conn.execute(
        """
        INSERT INTO werk_job_deps (dep, jid, on_failure, outcome, settled_at)
        SELECT 'old-dep-' || d, 'old-job-' || d || '-' || k, 'fail', 'completed', now()
        FROM generate_series(1, $1) AS d, generate_series(1, $2) AS k
        """,
        DEPS,
        FAN_OUT,
    )
    await conn.execute("ANALYZE werk_job_deps")
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


@pytest.mark.parametrize(
    ("settle", "states"),
    [
        # the whole chain below the head goes dead, level by level
        ("SELECT werk.fail($1, $2, '{\"retry\": false}')", {"dead"}),
        # the next job of the chain is released, the rest wait
        ("SELECT werk.ack($1, $2)", {"available", "waiting"}),
    ],
)
async def test_settling_looks_up_the_edges_it_follows(api, wide_edges, settle, states):
    conn = wide_edges
    jids, lease = await leased_head_of_chain(api)
    async with conn.transaction():
        await conn.execute(settle, jids[0], lease)
        # The settling runs at commit; this runs it now, inside the transaction.
        await conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
        seq_scans = await conn.fetchval(
            "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'werk_job_deps'"
        )
        rows = await conn.fetch("SELECT state::text FROM werk_jobs WHERE jid = ANY($1)", jids[1:])
    assert {r["state"] for r in rows} == states
    assert seq_scans == 0
