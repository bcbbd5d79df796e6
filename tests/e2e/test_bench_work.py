"""bench's work scenario against a real server: its lean client reads only each fetched job's
jid and lease (bench/scenarios.py), so a change to what a fetch or a batch ack answers must
still leave it working, and every job it reports done must be gone from the table."""

from __future__ import annotations

import json

import pytest

from bench import scenarios
from tests.support.harness import bench_context
from tests.support.helpers import count_jobs, sql
from tests.support.server import ServerProcess


@pytest.mark.parametrize(("count", "jobs"), [(1, 60), (100, 500)])
async def test_the_work_scenario_fetches_and_acks_every_job(
    werk_server: ServerProcess, database_url: str, count: int, jobs: int
) -> None:
    ctx = bench_context(database_url, jobs=jobs, url=werk_server.url)
    result = await scenarios.work(ctx, count=count, workers=3)
    assert result["jobs"] == jobs
    assert await count_jobs(database_url) == 0


async def test_the_lean_client_fails_on_a_lease_lost(
    werk_server: ServerProcess, database_url: str
) -> None:
    ctx = bench_context(database_url, jobs=3, url=werk_server.url)
    await scenarios.seed(ctx, "lean", 3)
    (conn,) = await scenarios.open_connections(ctx.target.host, ctx.target.port, 1)
    try:
        body = b'{"queues":["lean"],"wid":"w","count":3}'
        jobs = await scenarios.fetch_claimed(conn, body)
        assert len(jobs) == 3 and all(j.jid and j.lease for j in jobs)
        stale = [scenarios.Claimed(jid=jobs[0].jid, lease="00000000-0000-4000-8000-000000000000")]
        with pytest.raises(RuntimeError, match="lease lost"):
            await scenarios.ack_claimed(conn, stale)
        await scenarios.ack_claimed(conn, jobs)
    finally:
        conn.close()


async def test_the_lean_batch_push_as_the_sdk_stores_the_sdks_jobs(
    werk_server: ServerProcess, database_url: str
) -> None:
    """The sdk scenario's lean push-batch row sends the jobs push_many sends: each with a jid of
    its own and args numbering it, none sent twice (warm-up included)."""
    ctx = bench_context(database_url, jobs=30, url=werk_server.url)
    result = await scenarios.push_batch(ctx, 10, 1, "lean-as-sdk", as_sdk=True)
    assert result["jobs"] == 30
    rows = await sql(database_url, "SELECT jid, args FROM werk_jobs WHERE queue = 'lean-as-sdk'")
    assert len(rows) == 40  # the warm-up's 10 and the 30 timed
    assert sorted(json.loads(r["args"])[0] for r in rows) == list(range(40))
    assert all(len(r["jid"]) == 28 for r in rows)
