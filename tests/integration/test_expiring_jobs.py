"""Expiring jobs against a real PostgreSQL, with an injected clock: a job past its expires_at is
never handed out (not by a fetch, not by a push to a waiting fetch, not to a fetch racing the
upkeep pass), becomes expired in the upkeep pass, is counted, browsable and pruned."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from tests.integration.admin.test_metrics import scrape, value
from tests.support.helpers import sql

FETCH = {"queues": ["default"], "wid": "w1", "count": 10}


async def push(api: Any, **job: Any) -> dict[str, Any]:
    r = await api.http.post("/v1/jobs", json={"jobtype": "report", **job})
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


async def fetch(api: Any, **extra: Any) -> list[dict[str, Any]]:
    r = await api.http.post("/v1/fetch", json={**FETCH, **extra})
    jobs: list[dict[str, Any]] = r.json()["jobs"]
    return jobs


async def test_a_job_past_expires_at_is_never_fetched_and_then_expires(api):
    at = api.clock.now() + timedelta(seconds=30)
    job = await push(api, expires_at=at.isoformat())
    assert job["expires_at"] == at.isoformat().replace("+00:00", "Z")
    api.clock.advance(30)  # expires_at reached, no upkeep pass yet
    assert await fetch(api) == []
    assert (await api.maintain())["expired"] == 1
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["state"] == "expired" and stored["attempt"] == 0
    assert await fetch(api) == []
    assert value(await scrape(api), "werk_jobs_expired_total", queue="default") == 1


async def test_a_job_without_expiry_or_time_bound_has_none(api, database_url):
    await push(api)
    await push(api, unique={"key": "no-bound"})
    await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "a"}, {"jobtype": "b"}]})
    rows = await sql(database_url, "SELECT expires_at, unique_until FROM werk_jobs")
    assert len(rows) == 4
    assert all(r["expires_at"] is None and r["unique_until"] is None for r in rows)


async def test_a_job_started_in_time_runs(api):
    job = await push(api, expires_in=30)
    api.clock.advance(29)
    (taken,) = await fetch(api)
    assert taken["jid"] == job["jid"]
    api.clock.advance(10)
    assert (await api.maintain())["expired"] == 0
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": taken["lease"]})
    assert r.status_code == 204


async def test_expires_in_counts_from_at(api):
    at = api.clock.now() + timedelta(seconds=100)
    job = await push(api, at=at.isoformat(), expires_in=60)
    assert job["expires_at"] == (at + timedelta(seconds=60)).isoformat().replace("+00:00", "Z")
    api.clock.advance(150)
    await api.maintain()
    (taken,) = await fetch(api)
    assert taken["jid"] == job["jid"]


async def test_a_scheduled_job_past_expiry_expires_without_being_promoted(api):
    at = api.clock.now() + timedelta(seconds=100)
    job = await push(api, at=at.isoformat(), expires_at=(at + timedelta(seconds=1)).isoformat())
    api.clock.advance(200)
    assert await api.maintain() == {"released": 0, "expired": 1, "promoted": 0, "pruned": 0}
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "expired"


async def test_a_retry_due_after_expiry_expires(api):
    job = await push(api, expires_in=60)
    (taken,) = await fetch(api)
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail", json={"lease": taken["lease"], "retry_in": 120}
    )
    assert r.json()["state"] == "scheduled"
    api.clock.advance(121)
    assert (await api.maintain())["expired"] == 1


async def test_a_push_never_hands_an_expired_job_to_a_waiting_fetch(api):
    waiting = asyncio.create_task(fetch(api, wait=1))
    await asyncio.sleep(0.2)  # the fetch is long-polling on this node
    past = api.clock.now() - timedelta(seconds=1)
    job = await push(api, expires_at=past.isoformat())
    assert job["state"] == "available"
    assert await waiting == []
    assert (await api.maintain())["expired"] == 1


async def test_fetches_racing_the_upkeep_pass_never_get_an_expired_job(api, database_url):
    for _ in range(20):
        soon = api.clock.now() + timedelta(seconds=5)
        await api.http.post(
            "/v1/jobs/batch",
            json={"jobs": [{"jobtype": "r", "expires_at": soon.isoformat()} for _ in range(50)]},
        )
        api.clock.advance(5)
        results = await asyncio.gather(
            api.maintain(), *(fetch(api, wid=f"w{i}") for i in range(4)), api.maintain()
        )
        assert all(r == [] for r in results[1:-1])
    rows = await sql(database_url, "SELECT state::text, count(*) AS n FROM werk_jobs GROUP BY 1")
    assert {r["state"]: r["n"] for r in rows} == {"expired": 1000}


async def test_expired_jobs_are_listed_retried_and_pruned_like_dead(make_api):
    api = await make_api(dead_retention_days=1)
    job = await push(api, expires_in=1)
    api.clock.advance(2)
    await api.maintain()
    r = await api.http.get("/v1/jobs", params={"state": "expired"})
    assert r.status_code == 200, r.text
    assert [j["jid"] for j in r.json()["jobs"]] == [job["jid"]]
    other = await push(api, expires_in=1)
    api.clock.advance(2)
    await api.maintain()
    retried = await api.http.post(f"/v1/jobs/{other['jid']}/retry")
    assert retried.json()["state"] == "available" and retried.json()["expires_at"] is None
    api.clock.advance(86401)
    assert (await api.maintain())["pruned"] == 1
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).status_code == 404
