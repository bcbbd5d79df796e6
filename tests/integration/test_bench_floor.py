"""bench/floor.py sends the server's own statements straight from asyncpg, its parameters
spelled as the server's codecs spell them, so a statement whose parameters change must change
there too (an ack statement taking JSON lists once broke a record run, not a test). Each
statement runs here once, on a few jobs."""

from __future__ import annotations

import asyncpg
import pytest

from bench import floor, least_server, scenarios, sdk
from tests.support.harness import bench_context


@pytest.mark.parametrize("lean", [False, True], ids=["werk_jobs", "lean copy"])
async def test_the_floor_statements_push_claim_and_ack(database_url: str, lean: bool) -> None:
    ctx = bench_context(database_url, jobs=200)
    pushed = await floor.push_batches(ctx, lean=lean, batch=10)
    assert pushed["jobs"] == 200
    # claim_and_ack seeds ctx.jobs more, then claims and acks until none is left (the lean copy
    # is made afresh for each scenario, so it holds only those).
    worked = await floor.claim_and_ack(ctx, lean=lean, count=10)
    assert worked["jobs"] == (200 if lean else 400)
    if not lean:  # (the lean copy is dropped afterwards)
        conn = await asyncpg.connect(database_url)
        try:
            assert await conn.fetchval("SELECT count(*) FROM werk_jobs") == 0
        finally:
            await conn.close()


async def _stored(database_url: str, queue: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetch(
            "SELECT DISTINCT jid, state::text FROM werk_jobs WHERE queue = $1", queue
        )
    finally:
        await conn.close()


async def test_the_single_push_statement_one_at_a_time(database_url: str) -> None:
    ctx = bench_context(database_url, jobs=20)
    pushed = await floor.push_singly(ctx)
    assert pushed["jobs"] == 20
    rows = await _stored(database_url, floor.QUEUE)
    assert len(rows) == 20
    assert {r["state"] for r in rows} == {"available"}


async def test_the_least_server_stores_the_lean_clients_and_the_sdks_pushes(
    database_url: str,
) -> None:
    """The floor's least server (bench/least_server.py, its own process) stores each push the
    lean client and the SDK's Client.push send as an available job of werk_jobs, each with a
    jid of its own, and answers what the SDK reads."""
    with least_server.started(database_url, None) as least:
        ctx = bench_context(database_url, jobs=20, url=least.url)
        pushed = await scenarios.push_single(ctx, 1, "least-server")
        through_sdk = await sdk.push(ctx, 1)
    assert pushed["jobs"] == through_sdk["jobs"] == 20
    for queue in ("least-server", sdk.QUEUE):
        rows = await _stored(database_url, queue)
        assert len(rows) == 21  # and the warm-up's
        assert {r["state"] for r in rows} == {"available"}
