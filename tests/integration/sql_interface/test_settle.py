"""werk.ack and werk.fail: they settle the attempt a lease holds, in the caller's transaction, as
HTTP's ack and fail do (the job's retry policy, the backoff, kept results, counters); a lease
that is not current changes nothing and answers false (ack) or NULL (fail)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from tests.support.helpers import sql


async def fetched(api: Any, *bodies: dict[str, Any]) -> list[dict[str, Any]]:
    """Push the jobs over HTTP and fetch them: each with its lease."""
    for body in bodies:
        assert (await api.http.post("/v1/jobs", json=body)).status_code == 201
    r = await api.http.post(
        "/v1/fetch", json={"queues": ["default"], "wid": "w1", "count": len(bodies)}
    )
    jobs: list[dict[str, Any]] = r.json()["jobs"]
    assert len(jobs) == len(bodies)
    return sorted(jobs, key=lambda j: j["jid"])


async def counters(database_url: str) -> tuple[int, int]:
    (row,) = await sql(
        database_url,
        "SELECT coalesce(sum(processed), 0)::int AS p, coalesce(sum(failed), 0)::int AS f "
        "FROM werk_counters",
    )
    return row["p"], row["f"]


async def test_ack_completes_at_commit_and_a_stale_lease_changes_nothing(api, database_url):
    (job,) = await fetched(api, {"jobtype": "a", "jid": "ack-job-1"})
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            assert await conn.fetchval("SELECT werk.ack($1, $2)", job["jid"], job["lease"])
            # Not completed for anyone else until the commit.
            rows = await sql(database_url, "SELECT state FROM werk_jobs")
            assert [r["state"] for r in rows] == ["active"]
        assert await sql(database_url, "SELECT jid FROM werk_jobs") == []
        assert await counters(database_url) == (1, 0)
        again = await conn.fetchval("SELECT werk.ack($1, $2)", job["jid"], job["lease"])
        assert again is False
        assert await conn.fetchval("SELECT werk.ack($1, 'not-a-lease')", job["jid"]) is False
    finally:
        await conn.close()
    assert await counters(database_url) == (1, 0)


async def test_an_ack_rolled_back_leaves_the_attempt_to_its_worker(api, database_url):
    (job,) = await fetched(api, {"jobtype": "a"})
    conn = await asyncpg.connect(database_url)
    try:
        tx = conn.transaction()
        await tx.start()
        assert await conn.fetchval("SELECT werk.ack($1, $2)", job["jid"], job["lease"])
        await tx.rollback()
    finally:
        await conn.close()
    assert await counters(database_url) == (0, 0)
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204, r.text


async def test_an_ack_keeps_the_result_of_a_job_pushed_to_keep_it(api, database_url):
    body = {"jobtype": "a", "keep_result_for": 600}
    over_http, over_sql = await fetched(api, body, body)
    r = await api.http.post(
        f"/v1/jobs/{over_http['jid']}/ack", json={"lease": over_http["lease"], "result": {"n": 1}}
    )
    assert r.status_code == 204
    conn = await asyncpg.connect(database_url)
    try:
        ok = await conn.fetchval(
            "SELECT werk.ack($1, $2, $3::jsonb)", over_sql["jid"], over_sql["lease"], '{"n": 1}'
        )
    finally:
        await conn.close()
    assert ok is True
    http_result = (await api.http.get(f"/v1/jobs/{over_http['jid']}/result")).json()
    sql_result = (await api.http.get(f"/v1/jobs/{over_sql['jid']}/result")).json()
    assert sql_result["result"] == http_result["result"] == {"n": 1}
    assert sql_result["state"] == http_result["state"] == "completed"
    rows = await sql(
        database_url, "SELECT keep_until - finished_at AS kept FROM werk_stored_jobs ORDER BY jid"
    )
    assert [r["kept"] for r in rows] == [timedelta(seconds=600)] * 2


FAILURES = [
    ({"retry": 3}, {"errtype": "Boom", "message": "it broke", "backtrace": ["a.py:1", "b.py:2"]}),
    ({"retry": 3}, {"retry_in": 90}),
    ({"retry": 3}, {"retry": False}),
    ({"retry": 0}, {}),
    ({"retry": -1}, {"errtype": "Fatal"}),
]


@pytest.mark.parametrize(("job", "error"), FAILURES, ids=range(len(FAILURES)))
async def test_fail_does_what_http_fail_does(api, database_url, job, error):
    over_http, over_sql = await fetched(api, {"jobtype": "a", **job}, {"jobtype": "a", **job})
    r = await api.http.post(
        f"/v1/jobs/{over_http['jid']}/fail", json={"lease": over_http["lease"], **error}
    )
    assert r.status_code == 200, r.text
    conn = await asyncpg.connect(database_url)
    try:
        outcome = await conn.fetchval(
            "SELECT werk.fail($1, $2, $3::jsonb)",
            over_sql["jid"],
            over_sql["lease"],
            json.dumps(error),
        )
        stale = await conn.fetchval(
            "SELECT werk.fail($1, $2, '{}')", over_sql["jid"], over_sql["lease"]
        )
    finally:
        await conn.close()
    assert outcome == r.json()["state"]
    assert stale is None
    query = """SELECT state, retry_count, errtype, message, error_backtrace, lease,
                      finished_at IS NOT NULL AS finished, run_at - failed_at AS delay
               FROM werk_jobs WHERE jid = $1"""
    http_rows = await sql(database_url, query, over_http["jid"])
    sql_rows = await sql(database_url, query, over_sql["jid"])
    assert len(http_rows) == len(sql_rows) == (0 if outcome == "discarded" else 1)
    # A retry's delay is random (15 to 44 s after a first failure) unless retry_in names it;
    # a dead job keeps the run_at it had.
    if outcome == "scheduled":
        for row in (http_rows[0], sql_rows[0]):
            if "retry_in" in error:
                assert row["delay"] == timedelta(seconds=error["retry_in"])
            else:
                assert timedelta(seconds=15) <= row["delay"] <= timedelta(seconds=44)
    http_rows = [{k: v for k, v in r.items() if k != "delay"} for r in http_rows]
    sql_rows = [{k: v for k, v in r.items() if k != "delay"} for r in sql_rows]
    assert [dict(r) for r in sql_rows] == [dict(r) for r in http_rows]
    assert await counters(database_url) == (2, 2)


@pytest.mark.parametrize(
    "error",
    [
        {"errtype": 5},
        {"message": "x" * 10_001},
        {"backtrace": "a.py:1"},
        {"backtrace": [1]},
        {"retry": True},
        {"retry_in": -1},
        {"colour": "red"},
    ],
)
async def test_a_bad_failure_report_is_refused(api, database_url, error):
    (job,) = await fetched(api, {"jobtype": "a"})
    conn = await asyncpg.connect(database_url)
    try:
        with pytest.raises(asyncpg.InvalidParameterValueError) as raised:
            await conn.fetchval(
                "SELECT werk.fail($1, $2, $3::jsonb)", job["jid"], job["lease"], json.dumps(error)
            )
    finally:
        await conn.close()
    assert raised.value.message.startswith("invalid_request: error.")
    r = await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], **error})
    assert r.status_code == 422
    rows = await sql(database_url, "SELECT state FROM werk_jobs")
    assert [r["state"] for r in rows] == ["active"]


async def test_ack_of_a_job_others_depend_on_releases_them_with_its_result(api, database_url):
    """werk.ack keeps a job that others depend on (as HTTP's ack does): deleting it would fail
    its dependents as if it had been deleted."""
    (parent,) = await fetched(api, {"jobtype": "a", "jid": "sql-parent"})
    r = await api.http.post(
        "/v1/jobs", json={"jobtype": "b", "jid": "sql-child", "depends_on": ["sql-parent"]}
    )
    assert r.status_code == 201, r.text
    conn = await asyncpg.connect(database_url)
    try:
        acked = await conn.fetchval(
            "SELECT werk.ack($1, $2, $3::jsonb)", parent["jid"], parent["lease"], '{"rows": 3}'
        )
        assert acked is True
    finally:
        await conn.close()
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w2"})
    (child,) = r.json()["jobs"]
    assert child["jid"] == "sql-child"
    (dependency,) = child["dependencies"]
    assert dependency["jid"] == "sql-parent" and dependency["outcome"] == "completed"
    assert dependency["result"] == {"rows": 3}
