"""The database goes away and comes back: the server stays up, answers 503 with Retry-After,
and resumes by itself. And a graceful stop answers waiting long polls at once."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest

from tests.support.database import RestartablePostgres
from tests.support.helpers import sql
from tests.support.server import ServerProcess

FETCH = {"queues": ["default"], "wid": "w1", "count": 1}


@pytest.fixture
def private_pg():
    pg = RestartablePostgres()
    url = pg.start()
    try:
        yield pg, url
    finally:
        pg.stop()


def wait_until(predicate, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if predicate():
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s")


async def test_database_outage_answers_503_and_recovers_without_restart(private_pg, tmp_path):
    pg, url = private_pg
    server = ServerProcess(url, tmp_path, env={"WERK_POLL_INTERVAL": "0.5"}).start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            assert (
                await http.post("/v1/jobs", json={"jobtype": "x", "jid": "before-1"})
            ).is_success
            waiting = asyncio.create_task(
                http.post("/v1/fetch", json={**FETCH, "queues": ["idle"], "wait": 4})
            )
            await asyncio.sleep(0.3)

            pg.halt()
            r = await http.post("/v1/jobs", json={"jobtype": "x", "jid": "during-1"})
            assert r.status_code == 503
            assert r.headers["content-type"] == "application/problem+json"
            assert r.headers["retry-after"] == "1"
            assert r.json()["code"] == "database_unavailable"
            assert (await http.get("/readyz")).status_code == 503
            assert (await http.get("/livez")).status_code == 200
            assert (await http.get("/v1/jobs/before-1")).status_code == 503
            r = await http.post("/v1/fetch", json={**FETCH, "queues": ["idle"], "wait": 1})
            assert r.status_code == 503
            # The long poll that was waiting ends cleanly (no hang, no 500).
            r = await asyncio.wait_for(waiting, 25)
            assert r.status_code in (200, 503)
            assert server.process.poll() is None

            pg.resume()
            started = time.monotonic()
            while (await http.get("/readyz")).status_code != 200:
                assert time.monotonic() - started < 20, "did not recover"
                await asyncio.sleep(0.1)
            recovery = time.monotonic() - started
            print(f"recovered {recovery:.2f}s after PostgreSQL came back")
            assert (await http.get("/v1/jobs/before-1")).json()["state"] == "available"
            assert (await http.get("/v1/jobs/during-1")).status_code == 404  # never stored
            r = await http.post("/v1/jobs", json={"jobtype": "x", "jid": "after-01"})
            assert r.status_code == 201
            r = await http.post("/v1/fetch", json={**FETCH, "count": 5})
            assert {j["jid"] for j in r.json()["jobs"]} == {"before-1", "after-01"}
    finally:
        server.stop()


async def test_sigterm_answers_waiting_polls_and_leaves_leases(werk_server, database_url):
    async with httpx.AsyncClient(base_url=werk_server.url, timeout=30) as http:
        await http.post("/v1/jobs", json={"jobtype": "x", "jid": "leased-1"})
        (job,) = (await http.post("/v1/fetch", json=FETCH)).json()["jobs"]
        polls = [
            asyncio.create_task(http.post("/v1/fetch", json={**FETCH, "wid": f"w{i}", "wait": 25}))
            for i in range(20)
        ]
        await asyncio.sleep(0.5)
        started = time.monotonic()
        werk_server.process.send_signal(signal.SIGTERM)
        results = await asyncio.wait_for(asyncio.gather(*polls), 20)
        answered = time.monotonic() - started
        code = await asyncio.to_thread(werk_server.process.wait, 20)
    assert [r.json() for r in results] == [{"jobs": []}] * 20
    assert answered < 10  # not the 25 s the polls asked for
    assert code == 0
    (row,) = await sql(database_url, "SELECT state, lease FROM werk_jobs WHERE jid = 'leased-1'")
    assert row["state"] == "active" and str(row["lease"]) == job["lease"]
