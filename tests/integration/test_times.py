"""Times: only instants every reader can hold are accepted (push, batch, cursors) or computed
(retries); a stored time beyond them (old data, hand-written SQL) breaks no read and loses no
claim; answers write UTC as ``Z``."""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest

from tests.support.helpers import as_pushed, count_jobs, sql

# Each is in range as written, but not in UTC: 1 BC and the year 10000.
OUT_OF_RANGE = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]
FETCH = {"queues": ["q"], "wid": "w1", "count": 10}


def _assert_refused(r, loc: str) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["code"] == "invalid_request"
    assert loc in [e["loc"] for e in problem["errors"]]
    assert "out of range" in problem["detail"]


async def _totals(api) -> dict[str, int]:
    totals: dict[str, int] = (await api.http.get("/v1/info")).json()["totals"]
    return totals


@pytest.mark.parametrize("at", OUT_OF_RANGE)
async def test_push_refuses_a_time_beyond_the_bounds_in_utc(api, database_url, at):
    before = await _totals(api)
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "at": at})
    _assert_refused(r, "at")
    assert await count_jobs(database_url) == 0
    assert await _totals(api) == before


@pytest.mark.parametrize("at", OUT_OF_RANGE)
async def test_batch_push_refuses_a_time_beyond_the_bounds(api, database_url, at):
    jobs = [{"jobtype": "x"}, {"jobtype": "x", "at": at}]
    for prefer in ({}, {"Prefer": "return=minimal"}):
        r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs}, headers=prefer)
        _assert_refused(r, "jobs.1.at")
    assert await count_jobs(database_url) == 0


async def test_the_bounds_themselves_round_trip(api):
    for at, state in [
        ("0001-01-01T00:00:00Z", "available"),
        ("0001-01-01T14:00:00+14:00", "available"),
        ("9999-12-31T23:59:59.999999Z", "scheduled"),
        ("9999-12-31T09:59:59.999999-14:00", "scheduled"),
    ]:
        r = await api.http.post("/v1/jobs", json={"jobtype": "x", "at": at})
        assert r.status_code == 201, r.text
        job = r.json()
        assert job["state"] == state
        assert datetime.fromisoformat(job["at"]) == datetime.fromisoformat(at)
        assert job.pop("created") is True
        assert as_pushed((await api.http.get(f"/v1/jobs/{job['jid']}")).json()) == job


async def test_offsets_postgresql_cannot_read_are_taken_as_their_utc_time(api):
    """Python reads offsets up to 23:59, PostgreSQL only up to 15:59: the stored time is UTC."""
    at = "2030-01-01T00:00:00-16:10"
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "at": at})
    assert r.status_code == 201, r.text
    assert r.json()["at"] == "2030-01-01T16:10:00Z"
    batch = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "x", "at": at}]})
    assert batch.status_code == 201, batch.text
    assert batch.json()["jobs"][0]["at"] == "2030-01-01T16:10:00Z"


async def test_a_cursor_beyond_the_bounds_is_refused(api):
    await api.http.post("/v1/jobs", json={"jobtype": "x"})
    for created_at in [*OUT_OF_RANGE, "2026-01-01T00:00:00"]:  # (the last: no zone)
        raw = orjson.dumps([created_at, "abcdefgh"])
        cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        r = await api.http.get("/v1/jobs", params={"cursor": cursor})
        _assert_refused_cursor(r)
        page = await api.http.get("/queues/q", params={"cursor": cursor})  # the dashboard's
        assert page.status_code == 422, page.text


def _assert_refused_cursor(r) -> None:
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "invalid_request"
    assert [e["loc"] for e in r.json()["errors"]] == ["cursor"]


async def test_a_backoff_beyond_the_bounds_is_capped(api, database_url):
    """A thousand retries back off for 30,000 years: the retry time stops at the last instant
    Werk can read, on a fail and on an expired lease alike."""
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "queue": "q", "retry": 1000})
    jid = r.json()["jid"]
    await sql(database_url, "UPDATE werk_jobs SET retry_count = 990 WHERE jid = $1", jid)
    (job,) = (await api.http.post("/v1/fetch", json=FETCH)).json()["jobs"]
    r = await api.http.post(f"/v1/jobs/{jid}/fail", json={"lease": job["lease"]})
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "scheduled"
    assert r.json()["next_at"] == "9999-12-31T23:59:59.999999Z"
    stored = (await api.http.get(f"/v1/jobs/{jid}")).json()
    assert stored["failure"]["next_at"] == "9999-12-31T23:59:59.999999Z"

    await sql(database_url, "UPDATE werk_jobs SET run_at = $2 WHERE jid = $1", jid, api.clock.now())
    await api.maintain()  # due again
    (job,) = (await api.http.post("/v1/fetch", json=FETCH)).json()["jobs"]
    api.clock.advance(job["reserve_for"] + 1)
    await api.maintain()  # the lease expires: a failure with the backoff
    stored = (await api.http.get(f"/v1/jobs/{jid}")).json()
    assert stored["state"] == "scheduled"
    assert stored["failure"]["errtype"] == "ReservationExpired"
    assert stored["failure"]["next_at"] == "9999-12-31T23:59:59.999999Z"


async def test_retry_in_is_capped_at_the_last_readable_time(make_api, clock):
    clock.advance((datetime(9999, 6, 1, tzinfo=UTC) - clock.now()).total_seconds())
    api = await make_api()
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "queue": "q"})
    jid = r.json()["jid"]
    (job,) = (await api.http.post("/v1/fetch", json=FETCH)).json()["jobs"]
    r = await api.http.post(
        f"/v1/jobs/{jid}/fail", json={"lease": job["lease"], "retry_in": 365 * 86400}
    )
    assert r.status_code == 200, r.text
    assert r.json()["next_at"] == "9999-12-31T23:59:59.999999Z"
    assert (await api.http.get(f"/v1/jobs/{jid}")).status_code == 200


async def test_stored_times_beyond_the_bounds_break_no_read(api, database_url, caplog):
    """Rows as an older server (or SQL by hand) could leave them: a job due since 1 BC, one
    scheduled for the year 10000, one dead at 'infinity'. The claim that takes the first
    delivers it with the others claimed with it; nothing is left leased to nobody; every read
    answers, each such time read as the nearest bound, and the log says so."""
    jids = {}
    for name in ("first", "bc", "last", "y10000", "dead"):
        r = await api.http.post("/v1/jobs", json={"jobtype": name, "queue": "q"})
        jids[name] = r.json()["jid"]
    await sql(
        database_url,
        "UPDATE werk_jobs SET at = '0001-01-01T00:00:00+14:00' WHERE jid = $1",
        jids["bc"],
    )
    await sql(
        database_url,
        "UPDATE werk_jobs SET at = '9999-12-31T23:59:59-14:00', run_at = 'infinity',"
        " state = 'scheduled', enqueued_at = NULL WHERE jid = $1",
        jids["y10000"],
    )
    await sql(
        database_url,
        "UPDATE werk_jobs SET state = 'dead', finished_at = 'infinity', failed_at = 'infinity',"
        " retry_count = 1, errtype = 'E', message = 'm', enqueued_at = NULL WHERE jid = $1",
        jids["dead"],
    )
    caplog.set_level(logging.ERROR, logger="werk.db.pool")

    r = await api.http.post("/v1/fetch", json=FETCH)
    assert r.status_code == 200, r.text
    fetched = {j["jid"]: j for j in r.json()["jobs"]}
    assert set(fetched) == {jids["first"], jids["bc"], jids["last"]}
    assert fetched[jids["bc"]]["at"] == "0001-01-01T00:00:00Z"
    assert "outside what Werk can read" in caplog.text and "BC" in caplog.text
    for job in fetched.values():  # every claimed job was delivered: its lease works
        ack = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
        assert ack.status_code == 204
    assert await sql(database_url, "SELECT jid FROM werk_jobs WHERE state = 'active'") == []

    r = await api.http.get(f"/v1/jobs/{jids['y10000']}")
    assert r.status_code == 200, r.text
    assert r.json()["at"] == "9999-12-31T23:59:59.999999Z"
    r = await api.http.get(f"/v1/jobs/{jids['dead']}")
    assert r.status_code == 200, r.text
    assert r.json()["failure"]["failed_at"] == "9999-12-31T23:59:59.999999Z"
    for params in ({"queue": "q"}, {"state": "dead"}, {"state": "scheduled"}):
        r = await api.http.get("/v1/jobs", params=params)
        assert r.status_code == 200, (params, r.text)
        assert r.json()["jobs"]
    for page in ["/", "/queues/q", "/queues/q?state=scheduled", "/scheduled", "/dead",
                 f"/jobs/{jids['y10000']}", f"/jobs/{jids['dead']}"]:  # fmt: skip
        r = await api.http.get(page)
        assert r.status_code == 200, (page, r.text[:300])


async def test_answers_write_utc_as_z(api):
    # accepted with any offset
    spelled = (api.clock.now() + timedelta(hours=1)).astimezone(timezone(timedelta(hours=2)))
    spelled = spelled.isoformat()
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "at": spelled, "queue": "q"})
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["at"].endswith("Z") and job["created_at"].endswith("Z")
    assert datetime.fromisoformat(job["at"]) == datetime.fromisoformat(spelled)
    got = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert got["at"] == job["at"] and got["created_at"].endswith("Z")
    await api.http.post("/v1/jobs", json={"jobtype": "y", "queue": "q"})
    (fetched,) = (await api.http.post("/v1/fetch", json=FETCH)).json()["jobs"]
    for key in ("created_at", "enqueued_at", "lease_expires_at"):
        assert fetched[key].endswith("Z"), (key, fetched[key])
    r = await api.http.post(f"/v1/jobs/{fetched['jid']}/extend", json={"lease": fetched["lease"]})
    assert r.json()["lease_expires_at"].endswith("Z")
    r = await api.http.post(f"/v1/jobs/{fetched['jid']}/fail", json={"lease": fetched["lease"]})
    assert r.json()["next_at"].endswith("Z")
    assert (await api.http.get("/v1/info")).json()["server"]["now"].endswith("Z")
    await api.http.post("/v1/beat", json={"wid": "w1"})
    (worker,) = (await api.http.get("/v1/workers")).json()["workers"]
    assert worker["started_at"].endswith("Z") and worker["last_beat_at"].endswith("Z")
    page = (await api.http.get(f"/jobs/{job['jid']}")).text  # the dashboard's raw JSON
    assert job["created_at"] in page and "+00:00" not in page
