"""Job results over HTTP: an ack stores a result on a job kept with keep_result_for, the job
reads back completed, a result poll waits for the job to settle without holding a connection,
retention is honoured, and bad or oversized input changes nothing."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime

import pytest

from tests.support.helpers import sql


async def push(api, **job):
    job.setdefault("jobtype", "t")
    r = await api.http.post("/v1/jobs", json=job)
    assert r.status_code == 201, r.text
    return r.json()


async def fetch_one(api, wid="w1"):
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": wid})
    assert r.status_code == 200, r.text
    (job,) = r.json()["jobs"]
    return job


async def ack(api, job, **body):
    return await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"], **body})


async def result(api, jid, wait=None):
    params = {} if wait is None else {"wait": wait}
    return await api.http.get(f"/v1/jobs/{jid}/result", params=params)


async def test_a_kept_job_reads_back_completed_with_its_result(api):
    pushed = await push(api, jid="result-kept-1", keep_result_for=60)
    assert pushed["keep_result_for"] == 60
    assert "result" not in pushed and "completed_at" not in pushed  # not completed
    job = await fetch_one(api)
    r = await ack(api, job, result={"pages": 3, "names": ["a", "b"], "ok": True})
    assert r.status_code == 204, r.text
    got = (await api.http.get("/v1/jobs/result-kept-1")).json()
    assert got["state"] == "completed"
    assert got["result"] == {"pages": 3, "names": ["a", "b"], "ok": True}
    assert datetime.fromisoformat(got["completed_at"]) == api.clock.now()
    assert got["keep_result_for"] == 60 and got["lease_expires_at"] is None
    r = await result(api, "result-kept-1")
    assert r.status_code == 200
    assert r.json() == {
        "jid": "result-kept-1",
        "state": "completed",
        "done": True,
        "result": {"pages": 3, "names": ["a", "b"], "ok": True},
        "completed_at": got["completed_at"],
        "failure": None,
    }
    again = await push(api, jid="result-kept-1", keep_result_for=60)
    assert again["created"] is False and again["state"] == "completed"
    assert (again["result"], again["completed_at"]) == (got["result"], got["completed_at"])


async def test_a_job_without_keep_result_for_is_deleted_at_ack_as_before(api):
    await push(api, jid="result-gone-1")
    job = await fetch_one(api)
    assert (await ack(api, job, result=[1, 2])).status_code == 204
    assert (await api.http.get("/v1/jobs/result-gone-1")).status_code == 404
    r = await result(api, "result-gone-1")
    assert r.status_code == 404 and r.json()["code"] == "job_not_found"


async def test_every_json_value_is_a_result_and_null_is_none(api):
    for i, value in enumerate([0, "text", [1, [2, {"x": None}]], 1.5, False, None]):
        await push(api, jid=f"result-value-{i}", keep_result_for=60)
        job = await fetch_one(api)
        assert (await ack(api, job, result=value)).status_code == 204
        assert (await result(api, job["jid"])).json()["result"] == value


async def test_a_batch_ack_stores_each_items_result(api):
    for i in range(3):
        await push(api, jid=f"result-batch-{i}", keep_result_for=60)
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w", "count": 3})
    jobs = r.json()["jobs"]
    acks = [{"jid": j["jid"], "lease": j["lease"], "result": j["jid"].upper()} for j in jobs[:2]]
    acks.append({"jid": jobs[2]["jid"], "lease": jobs[2]["lease"]})
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert r.status_code == 200 and sorted(r.json()["acked"]) == sorted(j["jid"] for j in jobs)
    for j in jobs[:2]:
        assert (await result(api, j["jid"])).json()["result"] == j["jid"].upper()
    assert (await result(api, jobs[2]["jid"])).json()["result"] is None


async def test_only_the_current_lease_writes_its_result(api):
    """A job acked twice at once, with its current lease and a stale one (a worker's ack of an
    earlier attempt beside the retry's), in one batch either way round or in two requests: the
    stale ack changes nothing; the current one stores its result."""
    for i in range(3):
        await push(api, jid=f"result-twice-{i}", keep_result_for=60)
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w", "count": 3})
    first, second, third = r.json()["jobs"]
    stale = str(uuid.uuid4())

    def item(job, lease, result):
        return {"jid": job["jid"], "lease": lease, "result": result}

    acks = [
        item(first, first["lease"], "current"),
        item(first, stale, "stale"),
        item(second, stale, "stale"),
        item(second, second["lease"], "current"),
    ]
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert r.status_code == 200, r.text
    assert r.json() == {"acked": [first["jid"], second["jid"]], "lease_lost": []}
    answers = await asyncio.gather(
        ack(api, {**third, "lease": stale}, result="stale"), ack(api, third, result="current")
    )
    assert [a.status_code for a in answers] == [409, 204]
    for job in (first, second, third):
        assert (await result(api, job["jid"])).json()["result"] == "current"


async def test_one_batch_ack_completes_jobs_deleted_kept_and_depended_on(api, database_url):
    """The jobs deleted at ack and those kept (with a result, or for their dependents) are
    written by different statements; one batch holding every kind, and a lease not current,
    is answered as one."""
    for job in (
        {"jid": "mix-plain"},
        {"jid": "mix-kept", "keep_result_for": 60},
        {"jid": "mix-parent"},
        {"jid": "mix-stale"},
        {"jid": "mix-child", "depends_on": ["mix-parent"]},
        {"jid": "mix-last"},
    ):
        await push(api, **job)
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w", "count": 4})
    jobs = {j["jid"]: j for j in r.json()["jobs"]}
    assert sorted(jobs) == ["mix-kept", "mix-parent", "mix-plain", "mix-stale"]
    acks = [
        {"jid": jid, "lease": jobs[jid]["lease"], "result": jid}
        for jid in ("mix-plain", "mix-kept", "mix-parent")
    ]
    acks.append({"jid": "mix-stale", "lease": "0b4f1a8e-9a3a-4a5e-8c1d-6f2b3c4d5e6f"})
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert r.status_code == 200, r.text
    assert sorted(r.json()["acked"]) == ["mix-kept", "mix-parent", "mix-plain"]
    assert r.json()["lease_lost"] == ["mix-stale"]
    assert (await api.http.get("/v1/jobs/mix-plain")).status_code == 404
    assert (await result(api, "mix-kept")).json()["result"] == "mix-kept"
    assert (await api.http.get("/v1/jobs/mix-stale")).json()["state"] == "active"
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w", "count": 2})
    jobs = {j["jid"]: j for j in r.json()["jobs"]}
    assert sorted(jobs) == ["mix-child", "mix-last"]
    (dep,) = jobs["mix-child"]["dependencies"]
    assert dep["outcome"] == "completed" and dep["result"] == "mix-parent"
    acks = [{"jid": j["jid"], "lease": j["lease"]} for j in jobs.values()]
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert sorted(r.json()["acked"]) == ["mix-child", "mix-last"]
    assert await sql(database_url, "SELECT count(*) FROM werk_job_deps") == [(0,)]
    assert await sql(database_url, "SELECT count(*) FROM werk_dep_results") == [(0,)]
    assert await sql(database_url, "SELECT sum(processed) FROM werk_counters") == [(5,)]


async def test_completed_retention_keeps_every_job_and_stores_results(make_api):
    api = await make_api(completed_retention=30)
    await push(api, jid="result-retained-1")
    job = await fetch_one(api)
    assert (await ack(api, job, result={"n": 1})).status_code == 204
    got = (await api.http.get("/v1/jobs/result-retained-1")).json()
    assert got["state"] == "completed" and got["result"] == {"n": 1}


async def test_retention_is_keep_result_for_plus_completed_retention(make_api, database_url):
    api = await make_api(completed_retention=30)
    await push(api, jid="result-ret-own", keep_result_for=60)
    await push(api, jid="result-ret-server")
    for _ in range(2):
        assert (await ack(api, await fetch_one(api))).status_code == 204
    api.clock.advance(29)
    await api.maintain()
    assert {r["jid"] for r in await _stored(database_url)} == {
        "result-ret-own",
        "result-ret-server",
    }
    api.clock.advance(2)  # 31 s: past the server's retention only
    await api.maintain()
    assert {r["jid"] for r in await _stored(database_url)} == {"result-ret-own"}
    api.clock.advance(58)  # 89 s: 60 + 30 not yet past
    await api.maintain()
    assert {r["jid"] for r in await _stored(database_url)} == {"result-ret-own"}
    api.clock.advance(2)
    await api.maintain()
    assert await _stored(database_url) == []


async def test_keep_result_for_alone_bounds_the_job(api):
    await push(api, jid="result-ret-alone", keep_result_for=10)
    assert (await ack(api, await fetch_one(api), result=1)).status_code == 204
    api.clock.advance(9)
    assert (await api.maintain())["pruned"] == 0
    api.clock.advance(2)
    assert (await api.maintain())["pruned"] == 1
    assert (await result(api, "result-ret-alone")).status_code == 404


async def _stored(database_url):
    return await sql(database_url, "SELECT jid FROM werk_stored_jobs")


async def test_an_oversized_result_is_refused_and_changes_nothing(make_api):
    api = await make_api(max_result_bytes=100)
    await push(api, jid="result-big-1", keep_result_for=60)
    job = await fetch_one(api)
    r = await ack(api, job, result="x" * 99)  # 101 bytes of JSON with its quotes
    assert r.status_code == 413, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == "result_too_large"
    got = (await api.http.get("/v1/jobs/result-big-1")).json()
    assert got["state"] == "active" and got["result"] is None
    # The batch form refuses the whole request.
    r = await api.http.post(
        "/v1/ack",
        json={"acks": [{"jid": job["jid"], "lease": job["lease"], "result": ["y" * 200]}]},
    )
    assert r.status_code == 413 and r.json()["code"] == "result_too_large"
    assert (await api.http.get("/v1/jobs/result-big-1")).json()["state"] == "active"
    # The lease still holds: a result within the limit is stored.
    assert (await ack(api, job, result="x" * 98)).status_code == 204
    assert (await result(api, "result-big-1")).json()["result"] == "x" * 98


@pytest.mark.parametrize(
    "job",
    [
        {"keep_result_for": -1},
        {"keep_result_for": 365 * 86400 + 1},
        {"keep_result_for": "60"},
        {"keep_result_for": 1.5},
        {"keep_result_for": True},
    ],
)
async def test_a_bad_keep_result_for_is_refused(api, job):
    r = await api.http.post("/v1/jobs", json={"jobtype": "t", "jid": "result-bad-1", **job})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == "invalid_request"
    assert (await api.http.get("/v1/jobs/result-bad-1")).status_code == 404


async def test_keep_result_for_zero_is_not_kept(api):
    pushed = await push(api, jid="result-zero-1", keep_result_for=0)
    assert "keep_result_for" not in pushed  # absent: 0
    assert (await ack(api, await fetch_one(api))).status_code == 204
    assert (await api.http.get("/v1/jobs/result-zero-1")).status_code == 404


async def test_a_result_jsonb_cannot_keep_is_refused(api):
    await push(api, jid="result-nul-1", keep_result_for=60)
    job = await fetch_one(api)
    for bad in ({"a": "\u0000"}, 2**64, {"deep": _nested(70)}):
        r = await ack(api, job, result=bad)
        assert r.status_code == 422, r.text
        assert r.json()["code"] == "invalid_request"
    assert (await api.http.get("/v1/jobs/result-nul-1")).json()["state"] == "active"


def _nested(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("wait", ["-1", "soon", "nan"])
async def test_a_bad_wait_is_refused(api, wait):
    await push(api, jid="result-wait-1")
    r = await api.http.get("/v1/jobs/result-wait-1/result", params={"wait": wait})
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "invalid_request"


async def test_a_result_poll_is_answered_when_the_ack_lands(api):
    await push(api, jid="result-poll-1", keep_result_for=60)
    job = await fetch_one(api)
    waiting = asyncio.create_task(result(api, "result-poll-1", wait=20))
    await _until(lambda: "result-poll-1" in api.services.hub._result_waiters)
    acked_at = time.monotonic()
    assert (await ack(api, job, result="done")).status_code == 204
    answer = await waiting
    elapsed = time.monotonic() - acked_at
    assert answer.status_code == 200 and answer.json()["done"] is True
    assert answer.json()["result"] == "done"
    assert elapsed < 0.5, elapsed  # woken by the ack, not the re-check (0.2 s) nor the wait


async def test_a_result_poll_ends_when_its_wait_does(api):
    await push(api, jid="result-poll-2", keep_result_for=60)
    started = time.monotonic()
    r = await result(api, "result-poll-2", wait=0.5)
    assert 0.45 < time.monotonic() - started < 5
    assert r.status_code == 200
    assert r.json() == {
        "jid": "result-poll-2",
        "state": "available",
        "done": False,
        "result": None,
        "completed_at": None,
        "failure": None,
    }


async def test_the_wait_is_capped_by_the_servers_long_poll_limit(make_api):
    api = await make_api(max_fetch_wait=0.3)
    await push(api, jid="result-poll-3")
    started = time.monotonic()
    r = await result(api, "result-poll-3", wait=30)
    assert r.status_code == 200 and r.json()["done"] is False
    assert time.monotonic() - started < 3


async def test_a_dead_job_answers_its_waiter_with_its_failure(api):
    await push(api, jid="result-dead-1", retry=-1)
    job = await fetch_one(api)
    waiting = asyncio.create_task(result(api, "result-dead-1", wait=20))
    await _until(lambda: "result-dead-1" in api.services.hub._result_waiters)
    started = time.monotonic()
    r = await api.http.post(
        "/v1/jobs/result-dead-1/fail",
        json={"lease": job["lease"], "errtype": "Boom", "message": "it broke"},
    )
    assert r.json()["state"] == "dead"
    answer = (await waiting).json()
    assert time.monotonic() - started < 0.5
    assert answer["done"] is True and answer["state"] == "dead" and answer["result"] is None
    assert answer["failure"]["errtype"] == "Boom" and answer["failure"]["message"] == "it broke"
    assert answer["failure"]["remaining"] == 0


async def test_a_job_deleted_while_waited_for_answers_not_found(api):
    await push(api, jid="result-vanish-1")
    job = await fetch_one(api)
    waiting = asyncio.create_task(result(api, "result-vanish-1", wait=20))
    await _until(lambda: "result-vanish-1" in api.services.hub._result_waiters)
    assert (await ack(api, job, result=1)).status_code == 204
    r = await waiting
    assert r.status_code == 404 and r.json()["code"] == "job_not_found"


async def test_a_thousand_waiting_result_polls_hold_no_connection(make_api, database_url):
    api = await make_api(pool_max_size=4, admin_pool_max_size=2)
    await push(api, jid="result-many-1", keep_result_for=60)
    waiting = [asyncio.create_task(result(api, "result-many-1", wait=30)) for _ in range(1000)]
    await _until(lambda: len(api.services.hub._result_waiters.get("result-many-1", ())) == 1000, 60)
    backends = await sql(
        database_url,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()",
    )
    # The pools and the LISTEN connection at most, whatever the number of waiters.
    assert backends[0]["n"] <= 4 + 2 + 1, backends
    # The job traffic still flows: the pools are not held by the waiters.
    job = await fetch_one(api)
    assert (await ack(api, job, result={"all": "woken"})).status_code == 204
    answers = await asyncio.wait_for(asyncio.gather(*waiting), 30)
    assert {a.json()["result"]["all"] for a in answers} == {"woken"}


async def _until(predicate, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_kept_jobs_are_counted_in_the_metrics(api):
    await push(api, jid="result-metrics-1", queue="reports", keep_result_for=60)
    r = await api.http.post("/v1/fetch", json={"queues": ["reports"], "wid": "w"})
    (job,) = r.json()["jobs"]
    assert (await ack(api, job, result=1)).status_code == 204
    text = (await api.http.get("/metrics")).text
    assert 'werk_jobs{queue="reports",state="completed"} 1' in text, text[:2000]
