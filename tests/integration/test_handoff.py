"""A job pushed while a fetch is waiting on its queue (on the same node) is stored already
reserved for that fetch: the push's commit answers the fetch, with no claim of its own."""

from __future__ import annotations

import asyncio

from tests.support.helpers import sql
from werk.domain.bodies import JobPush


async def waiting_fetch(api, *, wid="w1", count=1, queues=("default",), wait=10.0):
    task = asyncio.create_task(
        api.http.post(
            "/v1/fetch", json={"queues": list(queues), "wid": wid, "count": count, "wait": wait}
        )
    )
    for _ in range(200):  # until the fetch is parked in the hub
        await asyncio.sleep(0.01)
        if any(w.wid == wid and w.waiting for ws in api.services.hub._waiters.values() for w in ws):
            return task
    raise AssertionError("the fetch never started waiting")


async def test_waiting_fetch_receives_the_pushed_job_reserved(api, database_url):
    fetch = await waiting_fetch(api)
    pushed = (await api.http.post("/v1/jobs", json={"jobtype": "x", "jid": "handed-0001"})).json()
    (job,) = (await fetch).json()["jobs"]
    assert job["jid"] == "handed-0001"
    assert (job["state"], job["attempt"], job["wid"]) == ("active", 1, "w1")
    assert job["lease"] and job["lease_expires_at"]
    # The producer sees what was stored: the job is already running (under a lease it is not
    # shown: that is the worker's).
    assert pushed["state"] == "active" and pushed["wid"] == "w1" and "lease" not in pushed
    (row,) = await sql(database_url, "SELECT state, wid, lease::text FROM werk_jobs")
    assert (row["state"], row["wid"], row["lease"]) == ("active", "w1", job["lease"])
    r = await api.http.post("/v1/jobs/handed-0001/ack", json={"lease": job["lease"]})
    assert r.status_code == 204


async def test_a_handed_job_shows_its_options_as_a_claimed_one_does(api):
    """A job handed over by its push is answered as the claim answers it: its retention and
    expiry shown, and a plain job's answer without them."""
    for jid, options in (
        ("handed-opts", {"keep_result_for": 60, "expires_in": 600}),
        ("handed-plain", {}),
    ):
        fetch = await waiting_fetch(api)
        await api.http.post("/v1/jobs", json={"jobtype": "x", "jid": jid, **options})
        (job,) = (await fetch).json()["jobs"]
        assert job["jid"] == jid
        assert ("keep_result_for" in job, "expires_at" in job) == (bool(options), bool(options))
        assert job.get("keep_result_for") == options.get("keep_result_for")


async def test_a_waiter_takes_up_to_its_count_the_rest_stays_available(api, database_url):
    fetch = await waiting_fetch(api, count=3)
    jobs = [{"jobtype": "x", "jid": f"batch-{i:04d}"} for i in range(5)]
    await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    got = [j["jid"] for j in (await fetch).json()["jobs"]]
    assert got == ["batch-0000", "batch-0001", "batch-0002"]
    rows = await sql(database_url, "SELECT jid, state FROM werk_jobs ORDER BY jid")
    assert [(r["jid"], r["state"]) for r in rows] == [
        *((f"batch-{i:04d}", "active") for i in range(3)),
        *((f"batch-{i:04d}", "available") for i in (3, 4)),
    ]


async def test_paused_queue_is_not_handed_off(api, database_url):
    r = await api.http.post("/v1/queues/default/pause")
    assert r.json()["paused"] is True
    fetch = await waiting_fetch(api, wait=0.5)
    await api.http.post("/v1/jobs", json={"jobtype": "x", "jid": "paused-0001"})
    assert (await fetch).json() == {"jobs": []}
    (row,) = await sql(database_url, "SELECT state, wid, attempt FROM werk_jobs")
    assert (row["state"], row["wid"], row["attempt"]) == ("available", None, 0)


async def test_scheduled_and_existing_jobs_are_not_handed_off(api, database_url):
    await api.http.post("/v1/jobs", json={"jobtype": "x", "jid": "exists-0001", "queue": "other"})
    fetch = await waiting_fetch(api, queues=("other-2",), wait=0.5)
    await api.http.post(
        "/v1/jobs", json={"jobtype": "x", "queue": "other-2", "at": "2999-01-01T00:00:00Z"}
    )
    r = await api.http.post("/v1/jobs", json={"jobtype": "y", "jid": "exists-0001"})
    assert r.status_code == 201 and r.json()["created"] is False
    assert (await fetch).json() == {"jobs": []}
    rows = await sql(database_url, "SELECT state FROM werk_jobs")
    assert sorted(r["state"] for r in rows) == ["available", "scheduled"]


async def test_a_waiter_that_timed_out_still_gets_a_job_handed_to_it(api):
    """The push took the waiter just as its wait ran out: the fetch must wait for the push's
    answer rather than return [] and leave the job reserved for nobody."""
    fetch = await waiting_fetch(api, wait=0.3)
    (waiter,) = {w for ws in api.services.hub._waiters.values() for w in ws}
    taken = api.services.hub.take("default")
    assert taken is waiter
    await asyncio.sleep(0.5)  # its time is up; the fetch now waits for the push's answer
    assert not fetch.done()
    waiter.hand_over([])  # the push stored nothing for it (say, a paused queue)
    assert (await fetch).json() == {"jobs": []}


async def test_many_pushes_many_waiters_each_job_once(api, database_url):
    fetches = [await waiting_fetch(api, wid=f"w{i}", count=2) for i in range(6)]
    pushes = [
        api.http.post("/v1/jobs", json={"jobtype": "x", "jid": f"many-{i:04d}"}) for i in range(12)
    ]
    assert all(r.status_code == 201 for r in await asyncio.gather(*pushes))
    got = [j["jid"] for f in fetches for j in (await f).json()["jobs"]]
    assert len(got) == len(set(got))
    rows = await sql(database_url, "SELECT jid, state, wid FROM werk_jobs WHERE state = 'active'")
    assert sorted(got) == sorted(r["jid"] for r in rows)


async def test_a_fetch_cancelled_while_its_push_commits_gets_its_job_handed_back(api, database_url):
    """The push took the waiting fetch, then the fetch was cancelled before the commit answered
    it: the job must not stay reserved for nobody until its lease runs out."""
    services, hub = api.services, api.services.hub
    fetch = asyncio.create_task(services.claim.fetch(["default"], "w1", 1, 10.0))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if any(w.waiting for ws in hub._waiters.values() for w in ws):
            break
    (waiter,) = {w for ws in hub._waiters.values() for w in ws}
    push = asyncio.create_task(services.push.push_one(JobPush(jobtype="x", jid="cancelled-0001")))
    while not waiter.taken:  # the push has taken the fetch; its statement is in flight
        await asyncio.sleep(0)
    fetch.cancel()
    result = await push
    assert result.created and result.job["wid"] == "w1"  # stored reserved for the fetch…
    (row,) = await sql(database_url, "SELECT state, attempt, wid, lease FROM werk_jobs")
    assert dict(row) == {"state": "available", "attempt": 0, "wid": None, "lease": None}  # …back
    assert fetch.cancelled()
