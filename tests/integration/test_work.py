"""Fetch, ack, fail, extend and beat: every transition, and lease_lost for stale tokens."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import datetime

import pytest

from tests.support.helpers import sql


async def push(api, **job):
    job.setdefault("jobtype", "t")
    r = await api.http.post("/v1/jobs", json=job)
    assert r.status_code == 201, r.text
    return r.json()


async def fetch(api, queues=("default",), count=10, wid="w1", wait=0):
    r = await api.http.post(
        "/v1/fetch", json={"queues": list(queues), "wid": wid, "count": count, "wait": wait}
    )
    assert r.status_code == 200, r.text
    return r.json()["jobs"]


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def test_fetch_leases_the_job(api):
    job = await push(api, reserve_for=120)
    (got,) = await fetch(api)
    assert got["jid"] == job["jid"]
    assert got["state"] == "active" and got["attempt"] == 1 and got["wid"] == "w1"
    assert got["lease"]
    assert (ts(got["lease_expires_at"]) - api.clock.now()).total_seconds() == 120
    assert await fetch(api) == []  # leased jobs are not handed out again


async def test_a_fetched_job_carries_what_its_attempt_needs(api):
    """The fetch answer leaves out what an active job cannot have (a result, a completion) and
    gives the job's retention, expiry and unique lock only when it has them; a read of the job
    shows them all."""
    plain = await push(api, queue="shown")
    kept = await push(
        api, queue="shown", keep_result_for=60, expires_in=600, unique={"key": "fetched-k"}
    )
    by_jid = {j["jid"]: j for j in await fetch(api, queues=("shown",))}
    assert set(by_jid) == {plain["jid"], kept["jid"]}
    absent = {"result", "completed_at", "dependents", "keep_result_for", "expires_at", "unique"}
    assert not absent & set(by_jid[plain["jid"]])
    got = by_jid[kept["jid"]]
    assert not {"result", "completed_at", "dependents"} & set(got)
    assert got["keep_result_for"] == 60 and got["expires_at"] == kept["expires_at"]
    assert got["unique"]["key"] == "fetched-k" and got["unique"] == kept["unique"]
    assert got["lease"] and got["state"] == "active"
    read = (await api.http.get(f"/v1/jobs/{plain['jid']}")).json()
    assert read["keep_result_for"] == 0 and read["result"] is None
    assert read["completed_at"] is None and read["expires_at"] is None and read["unique"] is None
    assert "lease" not in read


async def test_every_attempt_gets_a_lease_of_its_own(api):
    """Leases are cut from random bytes drawn once per claim statement: every job of six
    concurrent fetches (which may share statements), and a second attempt, gets its own."""
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "t"}] * 300})
    assert r.status_code == 201, r.text
    fetched = await asyncio.gather(*(fetch(api, count=50, wid=f"w{i}") for i in range(6)))
    jobs = [j for batch in fetched for j in batch]
    assert len(jobs) == 300 and len({j["jid"] for j in jobs}) == 300
    leases = [j["lease"] for j in jobs]
    assert len(set(leases)) == 300
    assert all(_CANONICAL_UUID.fullmatch(lease) for lease in leases), leases[:3]
    assert {uuid.UUID(lease).version for lease in leases} == {4}  # as gen_random_uuid()'s
    assert {uuid.UUID(lease).variant for lease in leases} == {uuid.RFC_4122}
    first = jobs[0]
    r = await api.http.post(
        f"/v1/jobs/{first['jid']}/fail", json={"lease": first["lease"], "retry_in": 0}
    )
    assert r.status_code == 200, r.text
    await api.maintain()
    (again,) = await fetch(api)
    assert again["jid"] == first["jid"] and again["attempt"] == 2
    assert again["lease"] not in leases


async def test_queues_are_tried_in_the_given_order(api):
    low = await push(api, queue="low")
    high = await push(api, queue="high")
    assert [j["jid"] for j in await fetch(api, ["high", "low"], count=1)] == [high["jid"]]
    assert [j["jid"] for j in await fetch(api, ["high", "low"], count=1)] == [low["jid"]]


async def test_one_fetch_spans_queues_in_order(api):
    a = [await push(api, queue="a") for _ in range(2)]
    b = [await push(api, queue="b") for _ in range(2)]
    got = await fetch(api, ["b", "a"], count=3)
    assert [j["jid"] for j in got] == [b[0]["jid"], b[1]["jid"], a[0]["jid"]]


async def test_priority_then_age_within_a_queue(api):
    first = await push(api)
    second = await push(api)
    urgent = await push(api, priority=10)
    got = await fetch(api, count=3)
    assert [j["jid"] for j in got] == [urgent["jid"], first["jid"], second["jid"]]


async def test_paused_queue_hands_out_nothing_but_accepts_pushes(api, database_url):
    await sql(database_url, "INSERT INTO werk_queues (name, paused) VALUES ('p', true)")
    job = await push(api, queue="p")
    assert job["state"] == "available"
    assert await fetch(api, ["p"]) == []
    await sql(database_url, "UPDATE werk_queues SET paused = false WHERE name = 'p'")
    assert [j["jid"] for j in await fetch(api, ["p"])] == [job["jid"]]


async def test_fetch_validation(api):
    for body, loc in [
        ({"queues": [], "wid": "w"}, "queues"),
        ({"queues": ["a b"], "wid": "w"}, "queues.0"),
        ({"queues": ["a"], "wid": ""}, "wid"),
        ({"queues": ["a"], "wid": "w", "count": 0}, "count"),
        ({"queues": ["a"], "wid": "w", "count": 101}, "count"),
        ({"queues": ["a"], "wid": "w", "wait": -1}, "wait"),
    ]:
        r = await api.http.post("/v1/fetch", json=body)
        assert r.status_code == 422, body
        assert loc in [e["loc"] for e in r.json()["errors"]], r.json()


async def test_ack_completes_and_deletes(api):
    await push(api)
    (job,) = await fetch(api)
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).status_code == 404
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"]["processed"] == 1 and info["totals"]["failed"] == 0
    # A second ack: the lease is no longer current (tests/integration/test_input_rules.py has the
    # rest).
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 409 and r.json()["code"] == "lease_lost"


@pytest.mark.parametrize("lease", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
async def test_wrong_lease_is_lease_lost_and_changes_nothing(api, lease):
    await push(api)
    (job,) = await fetch(api)
    for action, body in [
        ("ack", {"lease": lease}),
        ("fail", {"lease": lease, "errtype": "E"}),
        ("extend", {"lease": lease, "progress": {"step": 1}}),
    ]:
        r = await api.http.post(f"/v1/jobs/{job['jid']}/{action}", json=body)
        assert r.status_code == 409, (action, r.text)
        assert r.json()["code"] == "lease_lost"
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["state"] == "active" and stored["lease_expires_at"] == job["lease_expires_at"]
    assert stored["progress"] is None and stored["failure"] is None
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204  # the holder's lease still holds


async def test_a_lease_is_the_uuid_however_it_is_spelled(api):
    for _ in range(3):
        await push(api)
    jobs = await fetch(api, count=3)
    assert all(j["lease"] == j["lease"].lower() and len(j["lease"]) == 36 for j in jobs)
    upper, braced, bare = jobs
    r = await api.http.post(f"/v1/jobs/{upper['jid']}/ack", json={"lease": upper["lease"].upper()})
    assert r.status_code == 204, r.text
    acks = [
        {"jid": braced["jid"], "lease": "{" + braced["lease"] + "}"},
        {"jid": bare["jid"], "lease": bare["lease"].replace("-", "")},
    ]
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert r.json() == {"acked": [braced["jid"], bare["jid"]], "lease_lost": []}


async def test_batch_ack_reports_lost_leases(api):
    for _ in range(3):
        await push(api)
    jobs = await fetch(api, count=3)
    acks = [{"jid": j["jid"], "lease": j["lease"]} for j in jobs[:2]]
    acks.append({"jid": jobs[2]["jid"], "lease": "00000000-0000-0000-0000-000000000000"})
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert r.status_code == 200
    body = r.json()
    assert sorted(body["acked"]) == sorted(j["jid"] for j in jobs[:2])
    assert body["lease_lost"] == [jobs[2]["jid"]]


async def test_batch_ack_with_two_leases_in_one_item_acks_only_the_rest(api):
    """The server checks a batch's leases all at once when each looks canonical: two leases
    joined by a comma in one item must not pass for two items' worth."""
    for _ in range(3):
        await push(api)
    a, b, c = await fetch(api, count=3)
    acks = [
        {"jid": a["jid"], "lease": a["lease"] + "," + b["lease"]},
        {"jid": c["jid"], "lease": c["lease"]},
    ]
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert r.status_code == 200, r.text
    assert r.json() == {"acked": [c["jid"]], "lease_lost": [a["jid"]]}
    for job in (a, b):
        assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "active"


async def test_batch_ack_naming_a_job_twice_acks_it_once(api):
    """A statement takes one lease per jid: a stale lease beside the current one, before or
    after it, goes to a next statement, and neither hides the other."""
    for _ in range(3):
        await push(api)
    a, b, c = await fetch(api, count=3)
    stale = "00000000-0000-0000-0000-000000000000"
    acks = [
        {"jid": a["jid"], "lease": stale},
        {"jid": a["jid"], "lease": a["lease"]},
        {"jid": b["jid"], "lease": b["lease"]},
        {"jid": b["jid"], "lease": stale},
        {"jid": c["jid"], "lease": c["lease"]},
        {"jid": c["jid"], "lease": c["lease"]},
    ]
    r = await api.http.post("/v1/ack", json={"acks": acks})
    assert r.status_code == 200, r.text
    assert r.json() == {"acked": [a["jid"], b["jid"], c["jid"]], "lease_lost": []}
    for job in (a, b, c):
        assert (await api.http.get(f"/v1/jobs/{job['jid']}")).status_code == 404
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"]["processed"] == 3


async def test_fail_schedules_a_retry_with_backoff_and_failure_fields(api):
    await push(api, backtrace=5)
    (job,) = await fetch(api)
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail",
        json={
            "lease": job["lease"],
            "errtype": "KeyError",
            "message": "boom",
            "backtrace": ["a.py:1", "b.py:2"],
        },
    )
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["state"] == "scheduled"
    delay = (ts(result["next_at"]) - api.clock.now()).total_seconds()
    assert 15 <= delay <= 15 + 29  # count 0: 0^4 + 15 + rand(0..29) * 1
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["state"] == "scheduled" and "lease" not in stored
    failure = stored["failure"]
    assert failure["retry_count"] == 1 and failure["remaining"] == 24
    assert failure["errtype"] == "KeyError" and failure["message"] == "boom"
    assert failure["backtrace"] == ["a.py:1", "b.py:2"]
    assert failure["next_at"] == result["next_at"]
    # The old lease is dead; after the backoff the job runs again as attempt 2.
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 409
    api.clock.advance(delay + 0.001)
    await api.maintain()
    (again,) = await fetch(api)
    assert again["attempt"] == 2 and again["failure"]["retry_count"] == 1
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"] == {"processed": 1, "failed": 1, "enqueued": 1}


async def test_second_failure_backs_off_longer(api):
    await push(api)
    (job,) = await fetch(api)
    await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"]})
    api.clock.advance(100)
    await api.maintain()
    (job,) = await fetch(api)
    r = await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"]})
    delay = (ts(r.json()["next_at"]) - api.clock.now()).total_seconds()
    assert 16 <= delay <= 1 + 15 + 29 * 2  # count 1: 1 + 15 + rand(0..29) * 2


async def test_fail_with_retry_in(api):
    await push(api)
    (job,) = await fetch(api)
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], "retry_in": 3}
    )
    assert (ts(r.json()["next_at"]) - api.clock.now()).total_seconds() == 3


async def test_fail_with_retry_false_is_dead(api):
    await push(api)
    (job,) = await fetch(api)
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], "retry": False}
    )
    assert r.json() == {"jid": job["jid"], "state": "dead", "next_at": None}
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "dead"


async def test_retry_minus_one_is_dead_on_first_failure(api):
    await push(api, retry=-1)
    (job,) = await fetch(api)
    r = await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"]})
    assert r.json()["state"] == "dead"


async def test_retry_zero_discards_on_failure(api):
    await push(api, retry=0)
    (job,) = await fetch(api)
    r = await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"]})
    assert r.json()["state"] == "discarded"
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).status_code == 404
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"]["failed"] == 1


async def test_exhausted_retries_are_dead(api):
    await push(api, retry=2)
    for attempt in (1, 2, 3):
        (job,) = await fetch(api)
        assert job["attempt"] == attempt
        r = await api.http.post(
            f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], "retry_in": 0}
        )
        await api.maintain()
    assert r.json()["state"] == "dead"
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["failure"]["retry_count"] == 3 and stored["failure"]["remaining"] == 0


async def test_fail_validation(api):
    await push(api)
    (job,) = await fetch(api)
    for body, loc in [
        ({}, "lease"),
        ({"lease": job["lease"], "retry_in": -1}, "retry_in"),
        ({"lease": job["lease"], "retry": True}, "retry"),
        ({"lease": job["lease"], "backtrace": "x"}, "backtrace"),
        ({"lease": job["lease"], "errtype": "e" * 201}, "errtype"),
    ]:
        r = await api.http.post(f"/v1/jobs/{job['jid']}/fail", json=body)
        assert r.status_code == 422, body
        assert loc in [e["loc"] for e in r.json()["errors"]]
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["state"] == "active"


async def test_extend_moves_the_lease_and_checkpoints_progress(api):
    await push(api, reserve_for=60)
    (job,) = await fetch(api)
    api.clock.advance(50)
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/extend",
        json={"lease": job["lease"], "reserve_for": 300, "progress": {"done": 40}},
    )
    assert r.status_code == 200, r.text
    assert (ts(r.json()["lease_expires_at"]) - api.clock.now()).total_seconds() == 300
    # Past the original expiry, the job is still ours.
    api.clock.advance(100)
    await api.maintain()
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "active"
    # Extending without progress keeps the checkpoint; without reserve_for uses the job's own.
    r = await api.http.post(f"/v1/jobs/{job['jid']}/extend", json={"lease": job["lease"]})
    assert (ts(r.json()["lease_expires_at"]) - api.clock.now()).total_seconds() == 60
    # The next attempt receives the checkpoint.
    await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], "retry_in": 0})
    await api.maintain()
    (again,) = await fetch(api)
    assert again["progress"] == {"done": 40} and again["attempt"] == 2


async def test_extend_validation(api):
    await push(api)
    (job,) = await fetch(api)
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/extend", json={"lease": job["lease"], "reserve_for": 10}
    )
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "reserve_for"


async def test_expired_lease_is_a_failure_and_the_stale_token_is_lost(api):
    await push(api, reserve_for=60)
    (job,) = await fetch(api)
    api.clock.advance(59)
    assert (await api.maintain())["released"] == 0
    api.clock.advance(2)
    assert (await api.maintain())["released"] == 1
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["state"] == "scheduled"
    assert stored["failure"]["errtype"] == "ReservationExpired"
    assert "60 s" in stored["failure"]["message"]
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 409 and r.json()["code"] == "lease_lost"


async def test_poison_pill_is_dead_after_max_orphans(make_api):
    api = await make_api(max_orphans=3)
    await push(api, reserve_for=60, retry=25)
    for orphaning in (1, 2, 3):
        (job,) = await fetch(api)
        api.clock.advance(61)
        await api.maintain()
        stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
        if orphaning < 3:
            assert stored["state"] == "scheduled"
            api.clock.advance(3600)
            await api.maintain()
    assert stored["state"] == "dead"
    assert "poison pill" in stored["failure"]["message"]
    assert stored["failure"]["retry_count"] == 3


async def test_ordinary_failures_do_not_count_as_orphaning(make_api):
    api = await make_api(max_orphans=1)
    await push(api)
    (job,) = await fetch(api)
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], "retry_in": 0}
    )
    assert r.json()["state"] == "scheduled"


async def test_lost_worker_releases_its_leases_at_once(make_api):
    api = await make_api(worker_timeout=60)
    await push(api, reserve_for=3600)
    r = await api.http.post("/v1/beat", json={"wid": "w1", "hostname": "h", "pid": 1})
    assert r.json() == {"state": "running"}
    (job,) = await fetch(api, wid="w1")
    api.clock.advance(59)
    await api.maintain()
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "active"
    api.clock.advance(2)
    await api.maintain()
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["state"] == "scheduled"
    assert stored["failure"]["errtype"] == "WorkerLost"
    # The worker comes back: it is told to terminate, and its token is stale.
    r = await api.http.post("/v1/beat", json={"wid": "w1"})
    assert r.json() == {"state": "terminate"}
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 409


async def test_leases_a_lost_worker_takes_later_are_released_for_worker_timeout(make_api):
    """A worker marked gone that still fetches loses those leases at the next pass for another
    worker_timeout seconds (the same window retries leases a pass skipped); after that they
    wait out their reservation, as finding them means reading every active job."""
    api = await make_api(worker_timeout=60)
    for _ in range(2):
        await push(api, reserve_for=3600)
    await api.http.post("/v1/beat", json={"wid": "w1"})
    api.clock.advance(61)
    await api.maintain()  # w1 is gone, holding nothing
    (late,) = await fetch(api, wid="w1", count=1)
    api.clock.advance(59)
    await api.maintain()
    stored = (await api.http.get(f"/v1/jobs/{late['jid']}")).json()
    assert stored["state"] == "scheduled"
    assert stored["failure"]["errtype"] == "WorkerLost"
    api.clock.advance(2)  # 61 s after w1 was marked gone
    (later,) = await fetch(api, wid="w1", count=1)
    await api.maintain()
    assert (await api.http.get(f"/v1/jobs/{later['jid']}")).json()["state"] == "active"
    api.clock.advance(3600)
    await api.maintain()
    stored = (await api.http.get(f"/v1/jobs/{later['jid']}")).json()
    assert stored["failure"]["errtype"] == "ReservationExpired"


async def test_beating_worker_keeps_its_leases(make_api):
    api = await make_api(worker_timeout=60)
    await push(api, reserve_for=3600)
    await api.http.post("/v1/beat", json={"wid": "w1"})
    (job,) = await fetch(api, wid="w1")
    for _ in range(5):
        api.clock.advance(30)
        await api.http.post("/v1/beat", json={"wid": "w1"})
        await api.maintain()
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "active"


async def test_beat_reports_operator_state(api, database_url):
    body = {
        "wid": "w9",
        "hostname": "box",
        "pid": 42,
        "labels": ["py"],
        "rss_kb": 1000,
        "current_state": "running",
    }
    assert (await api.http.post("/v1/beat", json=body)).json() == {"state": "running"}
    await sql(database_url, "UPDATE werk_workers SET state = 'quiet' WHERE wid = 'w9'")
    assert (await api.http.post("/v1/beat", json=body)).json() == {"state": "quiet"}
    await sql(database_url, "UPDATE werk_workers SET state = 'terminate' WHERE wid = 'w9'")
    assert (await api.http.post("/v1/beat", json=body)).json() == {"state": "terminate"}
    (row,) = await sql(database_url, "SELECT * FROM werk_workers WHERE wid = 'w9'")
    assert (row["hostname"], row["pid"], row["labels"], row["rss_kb"]) == ("box", 42, ["py"], 1000)


async def test_beat_validation(api):
    for body in [{}, {"wid": ""}, {"wid": "w", "pid": -1}, {"wid": "w", "current_state": "x"}]:
        r = await api.http.post("/v1/beat", json=body)
        assert r.status_code == 422, body


async def test_info(api):
    await push(api, queue="a")
    await push(api, queue="a")
    await push(api, queue="b", at="2999-01-01T00:00:00Z")
    await api.http.post("/v1/beat", json={"wid": "w1"})
    api.clock.advance(7)
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"] == {"processed": 0, "failed": 0, "enqueued": 3}
    assert info["states"] == {"available": 2, "scheduled": 1}
    assert info["queues"] == [{"name": "a", "size": 2, "latency_seconds": 7.0, "paused": False}]
    assert info["workers"] == 1
    assert info["server"]["version"]


async def test_health(api):
    assert (await api.http.get("/livez")).json() == {"status": "ok"}
    assert (await api.http.get("/readyz")).json() == {"status": "ready"}
