"""A job pushed in the application's transaction: invisible until commit, gone with a rollback,
and the long polls waiting for it are woken by the commit's notification (the server's polling
fallback is set far out of reach here), never by a rollback."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from tests.support.helpers import count_jobs, sql

FETCH = {"queues": ["outbox"], "wid": "w1", "count": 5}
PUSH = "SELECT werk.push('mail', $1::jsonb, '{\"queue\": \"outbox\"}')"


async def listening(database_url: str) -> tuple[asyncpg.Connection, list[str]]:
    heard: list[str] = []
    conn = await asyncpg.connect(database_url)
    await conn.add_listener("werk_jobs", lambda _c, _pid, _ch, payload: heard.append(payload))
    return conn, heard


async def test_a_rolled_back_push_stores_nothing_and_wakes_no_one(make_api, database_url):
    api = await make_api(poll_interval=60)
    listener, heard = await listening(database_url)
    conn = await asyncpg.connect(database_url)
    try:
        await asyncio.sleep(0.5)  # the server's LISTEN connection is up
        started = time.monotonic()
        waiting = asyncio.create_task(api.http.post("/v1/fetch", json={**FETCH, "wait": 3}))
        await asyncio.sleep(0.3)
        tx = conn.transaction()
        await tx.start()
        await conn.fetchval(PUSH, "[1]")
        await conn.fetch("SELECT * FROM werk.push_many($1::jsonb)", '[{"jobtype": "b"}]')
        await tx.rollback()
        r = await waiting
        assert r.json() == {"jobs": []}
        assert time.monotonic() - started >= 3  # it waited out its `wait`
    finally:
        await conn.close()
    await asyncio.sleep(0.2)
    await listener.close()
    # Nothing but the server's hello (a sender, no body) when its LISTEN started.
    assert [p for p in heard if p.partition("|")[2]] == []
    assert await count_jobs(database_url) == 0
    assert await sql(database_url, "SELECT * FROM werk_counters") == []


async def test_a_committed_push_wakes_a_long_poll_at_commit(make_api, database_url):
    api = await make_api(poll_interval=60)
    listener, heard = await listening(database_url)
    conn = await asyncpg.connect(database_url)
    try:
        await asyncio.sleep(0.5)  # the server's LISTEN connection is up
        waiting = asyncio.create_task(api.http.post("/v1/fetch", json={**FETCH, "wait": 20}))
        await asyncio.sleep(0.3)
        tx = conn.transaction()
        await tx.start()
        jids = [await conn.fetchval(PUSH, "[1]"), await conn.fetchval(PUSH, "[2]")]
        await asyncio.sleep(1)
        assert not waiting.done()  # nothing to see before the commit
        assert await count_jobs(database_url) == 0
        committed = time.monotonic()
        await tx.commit()
        r = await asyncio.wait_for(waiting, 10)
        assert time.monotonic() - committed < 5  # woken by the commit, not by its `wait`
    finally:
        await conn.close()
    await listener.close()
    assert sorted(j["jid"] for j in r.json()["jobs"]) == sorted(jids)
    # One per push (each from a sender of its own: equal notifications would be delivered once).
    pushed = [p for p in heard if p.startswith("sql-")]
    assert [p.partition("|")[2] for p in pushed] == ["outbox:1", "outbox:1"]
    assert len(set(pushed)) == 2
