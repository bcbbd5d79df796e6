"""Long polling: woken within moments of a push (in-process and across servers), empty after
`wait`, and no database connection held per waiting request."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.support.helpers import sql

FETCH = {"queues": ["default"], "wid": "w1", "count": 1}


async def test_waiting_fetch_returns_a_job_pushed_later(api):
    async def push_soon():
        await asyncio.sleep(0.1)
        await api.http.post("/v1/jobs", json={"jobtype": "late", "jid": "late-job-1"})

    started = time.monotonic()
    pusher = asyncio.create_task(push_soon())
    r = await api.http.post("/v1/fetch", json={**FETCH, "wait": 10})
    elapsed = time.monotonic() - started
    await pusher
    assert [j["jid"] for j in r.json()["jobs"]] == ["late-job-1"]
    assert elapsed < 5  # woken by the push, not by the end of the wait


async def test_waiting_fetch_returns_empty_after_wait(api):
    started = time.monotonic()
    r = await api.http.post("/v1/fetch", json={**FETCH, "wait": 0.5})
    assert r.json() == {"jobs": []}
    assert time.monotonic() - started >= 0.5


async def test_wait_is_capped_by_the_server(make_api):
    api = await make_api(max_fetch_wait=0.3)
    started = time.monotonic()
    r = await api.http.post("/v1/fetch", json={**FETCH, "wait": 30})
    assert r.json() == {"jobs": []}
    assert time.monotonic() - started < 5


async def test_many_waiters_each_get_one_job(api):
    waiters = [
        asyncio.create_task(api.http.post("/v1/fetch", json={**FETCH, "wid": f"w{i}", "wait": 10}))
        for i in range(10)
    ]
    await asyncio.sleep(0.2)
    jobs = [{"jobtype": "x", "jid": f"fanout-{i:04d}"} for i in range(10)]
    await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    results = await asyncio.gather(*waiters)
    got = sorted(j["jid"] for r in results for j in r.json()["jobs"])
    assert got == sorted(j["jid"] for j in jobs)


async def test_push_on_another_server_wakes_the_waiter(werk_server_factory):
    a = werk_server_factory()
    b = werk_server_factory()
    async with httpx.AsyncClient(timeout=30) as http:
        waiting = asyncio.create_task(http.post(a.url + "/v1/fetch", json={**FETCH, "wait": 20}))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        await http.post(b.url + "/v1/jobs", json={"jobtype": "x", "jid": "cross-node-1"})
        r = await waiting
        elapsed = time.monotonic() - started
    assert [j["jid"] for j in r.json()["jobs"]] == ["cross-node-1"]
    assert elapsed < 10


async def test_idle_long_polls_hold_no_database_connections(werk_server_factory, database_url):
    server = werk_server_factory(env={"WERK_POOL_MAX_SIZE": "4", "WERK_POOL_MIN_SIZE": "1"})
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=200)) as http:
        polls = [
            asyncio.create_task(
                http.post(server.url + "/v1/fetch", json={**FETCH, "wid": f"w{i}", "wait": 4})
            )
            for i in range(100)
        ]
        await asyncio.sleep(2)
        rows = await sql(
            database_url,
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'werk'",
        )
        results = await asyncio.gather(*polls)
    assert all(r.status_code == 200 and r.json() == {"jobs": []} for r in results)
    # At most the two pools (4 for the job traffic, 3 for the rest) plus the one LISTEN
    # connection, with 100 requests waiting.
    assert rows[0]["n"] <= 8
