"""Completed jobs kept for their result live in werk_completed_jobs, never in werk_jobs
(0017_completed_jobs_table.sql): every reader still shows them, and a kept job's jid stays taken,
also against a push racing the ack that moves the job."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.support.helpers import sql
from werk.db import queries
from werk.domain.job import NewJob


async def push(api, **job):
    job.setdefault("jobtype", "t")
    r = await api.http.post("/v1/jobs", json=job)
    assert r.status_code in (200, 201), r.text
    return r.json()


async def fetch_one(api, queue="default"):
    r = await api.http.post("/v1/fetch", json={"queues": [queue], "wid": "w1"})
    assert r.status_code == 200, r.text
    (job,) = r.json()["jobs"]
    return job


async def where(database_url, jid):
    """The tables that hold jid."""
    rows = await sql(
        database_url,
        "SELECT 'werk_jobs' AS t FROM werk_jobs WHERE jid = $1 UNION ALL "
        "SELECT 'werk_completed_jobs' FROM werk_completed_jobs WHERE jid = $1",
        jid,
    )
    return [r["t"] for r in rows]


async def test_a_kept_job_moves_to_its_own_table_and_every_reader_shows_it(api, database_url):
    await push(api, jid="kept-move-1", queue="kq", args=["needle-77"], keep_result_for=600)
    job = await fetch_one(api, "kq")
    r = await api.http.post(
        "/v1/jobs/kept-move-1/ack", json={"lease": job["lease"], "result": {"n": 1}}
    )
    assert r.status_code == 204, r.text
    assert await where(database_url, "kept-move-1") == ["werk_completed_jobs"]

    got = (await api.http.get("/v1/jobs/kept-move-1")).json()
    assert (got["state"], got["result"], got["queue"]) == ("completed", {"n": 1}, "kq")
    polled = (await api.http.get("/v1/jobs/kept-move-1/result", params={"wait": 5})).json()
    assert (polled["done"], polled["result"]) == (True, {"n": 1})
    for path in ("/v1/jobs?state=completed", "/v1/jobs?q=needle-77", "/v1/jobs?queue=kq"):
        listed = (await api.http.get(path)).json()
        assert [j["jid"] for j in listed["jobs"]] == ["kept-move-1"], path
    (queue,) = [q for q in (await api.http.get("/v1/queues")).json()["queues"] if q["name"] == "kq"]
    assert queue["counts"] == {"completed": 1}
    info = (await api.http.get("/v1/info")).json()
    assert info["states"]["completed"] == 1
    metrics = (await api.http.get("/metrics")).text
    assert 'werk_jobs{queue="kq",state="completed"} 1' in metrics
    assert "kept-move-1" in (await api.http.get("/completed?q=needle-77")).text

    # The jid stays taken: a push of it stores nothing and answers with the completed job.
    again = await push(api, jid="kept-move-1", queue="kq", args=["other"])
    assert (again["created"], again["state"], again["args"]) == (False, "completed", ["needle-77"])
    batch = await api.http.post(
        "/v1/jobs/batch", json={"jobs": [{"jobtype": "t", "jid": "kept-move-1"}]}
    )
    assert batch.json()["created"] == 0
    assert await where(database_url, "kept-move-1") == ["werk_completed_jobs"]

    # An operator deletes it; retention would have pruned it.
    r = await api.http.delete("/v1/jobs/kept-move-1")
    assert r.status_code == 204, r.text
    assert await where(database_url, "kept-move-1") == []
    assert (await api.http.get("/v1/jobs/kept-move-1")).status_code == 404


async def test_the_schema_keeps_completed_jobs_out_of_werk_jobs(api, database_url):
    await push(api, jid="kept-rule-1")
    with pytest.raises(asyncpg.CheckViolationError, match="werk_jobs_never_completed"):
        await sql(
            database_url,
            "UPDATE werk_jobs SET state = 'completed', finished_at = now() "
            "WHERE jid = 'kept-rule-1'",
        )
    with pytest.raises(asyncpg.CheckViolationError, match="werk_completed_jobs_completed"):
        await sql(
            database_url,
            "INSERT INTO werk_completed_jobs (jid, jobtype, queue, args, state, run_at, "
            "created_at, finished_at, keep_until) "
            "VALUES ('kept-rule-2', 't', 'q', '[]', 'dead', now(), now(), now(), now())",
        )


async def _held_ack(database_url, jid, lease):
    """A transaction that has moved jid to werk_completed_jobs (werk.ack) and not committed."""
    conn = await asyncpg.connect(database_url)
    transaction = conn.transaction()
    await transaction.start()
    assert await conn.fetchval("SELECT werk.ack($1, $2, '{\"n\": 2}'::jsonb)", jid, lease)
    return conn, transaction


async def _fetched(api, jid):
    await push(api, jid=jid, keep_result_for=600)
    return await fetch_one(api)


@pytest.mark.parametrize("path", ["http", "batch", "sql"])
async def test_a_push_racing_the_ack_that_keeps_its_jid_stores_nothing(api, database_url, path):
    """The push's insert waits on werk_jobs's key for the ack that moves the job, and then must
    find the jid kept: the check after the insert, in a fresh snapshot, sees it."""
    jid = f"kept-race-{path}"
    job = await _fetched(api, jid)
    acker, transaction = await _held_ack(database_url, jid, job["lease"])
    pusher = await asyncpg.connect(database_url)
    try:
        if path == "http":
            racing = asyncio.ensure_future(push(api, jid=jid, args=["racer"]))
        elif path == "batch":
            new = [
                NewJob(jid=j, jobtype="t", queue="default", args="[]", priority=0,
                       reserve_for=1800, retry=25, backtrace=0, custom="{}", at=None)
                for j in (jid, jid + "-b")
            ]  # fmt: skip
            racing = asyncio.ensure_future(queries.push_jobs(pusher, None, new, None))
        else:
            racing = asyncio.ensure_future(
                pusher.fetchval(
                    "SELECT werk.push('t', '[]', jsonb_build_object('jid', $1::text))", jid
                )
            )
        await asyncio.sleep(0.3)
        # werk.push_many looks for the jid first, in a statement of its own: it finds the job
        # the ack has not moved yet and answers with its jid, storing nothing.
        assert racing.done() == (path == "sql"), "the push did not wait for the ack"
        await transaction.commit()
        if path == "sql":
            assert await racing == jid
        else:
            answer = await racing
            if path == "http":
                assert (answer["created"], answer["state"]) == (False, "completed")
            else:
                assert [r["jid"] for r in answer] == [jid + "-b"]
    finally:
        await acker.close()
        await pusher.close()
    assert await where(database_url, jid) == ["werk_completed_jobs"]
    got = (await api.http.get(f"/v1/jobs/{jid}")).json()
    assert (got["state"], got["result"], got["args"]) == ("completed", {"n": 2}, [])


async def test_only_jids_the_pusher_gave_are_looked_up_among_the_kept(database_url):
    """A jid the server minted (``NewJob.minted``) names no kept job: its push does not look."""
    checks = (
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
        "WHERE funcname = 'werk_jids_free'"
    )
    conn = await asyncpg.connect(database_url, server_settings={"track_functions": "pl"})

    def jobs(prefix, n, minted):
        return [
            NewJob(jid=f"{prefix}-{i}", jobtype="t", queue="minted-q", args="[]", priority=0,
                   reserve_for=1800, retry=25, backtrace=0, custom="{}", at=None, minted=minted)
            for i in range(n)
        ]  # fmt: skip

    transaction = conn.transaction()  # rolled back: the counts are this transaction's
    await transaction.start()
    try:
        await queries.push_jobs(conn, None, jobs("minted-one", 1, True), None)
        await queries.push_jobs(conn, None, jobs("minted-three", 3, True), None)
        assert await conn.fetchval(checks) == 0
        await queries.push_jobs(conn, None, jobs("given-one", 1, False), None)
        await queries.push_jobs(
            conn, None, jobs("mixed-given", 1, False) + jobs("mixed-minted", 2, True), None
        )
        assert await conn.fetchval(checks) == 2
    finally:
        await transaction.rollback()
        await conn.close()


async def test_both_tables_have_the_same_columns(database_url):
    """werk_stored_jobs joins the two tables column by column: a column a later migration adds to
    werk_jobs must be added to werk_completed_jobs too, in the same place, with the same type."""
    columns = (
        "SELECT array_agg(attname || ' ' || format_type(atttypid, atttypmod) ORDER BY attnum) "
        "FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped"
    )
    conn = await asyncpg.connect(database_url)
    try:
        jobs = await conn.fetchval(columns, "werk_jobs")
        assert await conn.fetchval(columns, "werk_completed_jobs") == jobs
        assert await conn.fetchval(columns, "werk_stored_jobs") == jobs
    finally:
        await conn.close()
