"""Retention, and maintenance run by several nodes at once without handling a job twice."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.support.helpers import sql
from werk.config import Settings
from werk.db.pool import create_pool
from werk.db.sql import sql as sql_text
from werk.services.maintenance import Maintenance
from werk.services.wakeup import WakeHub


async def push_batch(api, n, **fields):
    jobs = [{"jobtype": "x", **fields} for _ in range(n)]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201
    return [j["jid"] for j in r.json()["jobs"]]


async def fetch_all(api, n):
    jobs = []
    while len(jobs) < n:
        r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w", "count": 100})
        got = r.json()["jobs"]
        assert got
        jobs += got
    return jobs


async def kill_all(api, jobs):
    for job in jobs:
        r = await api.http.post(
            f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], "retry": False}
        )
        assert r.json()["state"] == "dead"


async def test_dead_jobs_are_pruned_after_retention(make_api):
    api = await make_api(dead_retention_days=1)
    await push_batch(api, 3)
    await kill_all(api, await fetch_all(api, 3))
    api.clock.advance(86400 - 10)
    assert (await api.maintain())["pruned"] == 0
    api.clock.advance(20)
    assert (await api.maintain())["pruned"] == 3
    assert (await api.http.get("/v1/info")).json()["states"] == {}


async def test_dead_jobs_are_capped_oldest_first(make_api):
    api = await make_api(dead_max=5)
    jobs = []
    for _ in range(8):
        await push_batch(api, 1)
        jobs += await fetch_all(api, 1)
        await kill_all(api, jobs[-1:])
        api.clock.advance(1)
    assert (await api.maintain())["pruned"] == 3
    for job in jobs[:3]:
        assert (await api.http.get(f"/v1/jobs/{job['jid']}")).status_code == 404
    for job in jobs[3:]:
        assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "dead"


async def test_completed_retention_keeps_acked_jobs_for_a_while(make_api):
    api = await make_api(completed_retention=60)
    await push_batch(api, 1)
    (job,) = await fetch_all(api, 1)
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204
    stored = (await api.http.get(f"/v1/jobs/{job['jid']}")).json()
    assert stored["state"] == "completed" and "lease" not in stored
    api.clock.advance(61)
    assert (await api.maintain())["pruned"] == 1
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).status_code == 404


async def test_gone_workers_are_forgotten_after_a_day(make_api, database_url):
    api = await make_api(worker_timeout=60)
    await api.http.post("/v1/beat", json={"wid": "old"})
    api.clock.advance(61)
    await api.maintain()
    assert len(await sql(database_url, "SELECT 1 FROM werk_workers")) == 1
    api.clock.advance(86401)
    await api.maintain()
    assert await sql(database_url, "SELECT 1 FROM werk_workers") == []


async def test_nodes_running_maintenance_together_handle_each_job_once(api, database_url, clock):
    n = 3000
    for _ in range(n // 1000):
        await push_batch(api, 1000, reserve_for=60, retry=5)
    await fetch_all(api, n)
    clock.advance(61)
    settings = Settings(database_url=database_url)
    pools = [await create_pool(database_url, min_size=1, max_size=2) for _ in range(4)]
    try:
        nodes = []
        for pool in pools:
            hub = WakeHub(
                send_notify=_noop, queues_with_jobs=_none, count_peers=_zero, poll_interval=1
            )
            nodes.append(Maintenance(pool, clock, hub, settings))
        released = await asyncio.gather(*(m.release_orphans() for m in nodes))
    finally:
        for pool in pools:
            await pool.close()
    assert sum(released) == n
    rows = await sql(
        database_url,
        "SELECT retry_count, orphans, state, count(*) AS n FROM werk_jobs "
        "GROUP BY retry_count, orphans, state",
    )
    assert [(r["retry_count"], r["orphans"], r["state"], r["n"]) for r in rows] == [
        (1, 1, "scheduled", n)
    ]
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"]["failed"] == n


# The rows the job table's key index held at its last index pass: only a VACUUM that reads the
# indexes (a whole pass, after rows were deleted) counts them anew; a heap-only pass leaves it.
KEY_ENTRIES = "SELECT reltuples::int FROM pg_class WHERE oid = 'werk_jobs_pkey'::regclass"


async def test_vacuum_clears_the_indexes_once_enough_rows_changed(database_url):
    """Passes vacuum the heap only until the rows deleted since the last whole pass reach the
    threshold plus the scale times the table's rows; then a pass is whole. A pass with nothing
    changed since the one before is whole after a heap-only one, else skipped. werk_settlings is
    vacuumed with the job table."""
    from werk.db.queries import vacuum_jobs
    from werk.services.maintenance import VacuumPolicy

    conn = await asyncpg.connect(database_url)
    pool = await create_pool(database_url, min_size=1, max_size=2)
    policy = VacuumPolicy(threshold=100, scale=0.5)

    async def vacuum() -> str:
        done = await vacuum_jobs(pool, plan=policy.plan)
        assert done is not None
        policy.vacuumed(*done)
        return done[1]

    async def changed_reaches(n: int) -> None:
        # A backend hands its counts to the statistics when it goes idle, within a second.
        for _ in range(100):
            if (await conn.fetchval(sql_text("jobs_changed"))) >= n:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the statistics never counted {n} changed rows")

    async def settlings_vacuums() -> int:
        return await conn.fetchval("SELECT pg_stat_get_vacuum_count('werk_settlings'::regclass)")

    try:
        # Autovacuum and autoanalyze would renew the counts this test reads between its passes.
        for table in ("werk_jobs", "werk_settlings"):
            await conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
        await conn.execute(
            "INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, "
            "enqueued_at) SELECT 'vacuum-' || lpad(g::text, 4, '0'), 'x', 'default', '[]', "
            "'available', now(), now(), now() FROM generate_series(1, 300) g"
        )
        start = await conn.fetchval(sql_text("jobs_changed"))
        assert await vacuum() == "whole"  # the first pass is whole

        await conn.execute("DELETE FROM werk_jobs WHERE jid <= 'vacuum-0100'")
        await conn.execute(
            "INSERT INTO werk_settlings (jid, outcome, at) VALUES ('vacuum-0001', 'deleted', now())"
        )
        await conn.execute("DELETE FROM werk_settlings")
        await changed_reaches(start + 100)
        settled = await settlings_vacuums()
        # 100 changed rows < 100 + 0.5 * 300: the heap only.
        before = await conn.fetchval(KEY_ENTRIES)
        assert await vacuum() == "heap"
        assert await conn.fetchval(KEY_ENTRIES) == before  # the indexes not read
        assert await settlings_vacuums() == settled + 1

        await conn.execute("DELETE FROM werk_jobs WHERE jid <= 'vacuum-0150'")
        await changed_reaches(start + 150)
        # 150 < 100 + 0.5 * 200 (the rows the last pass counted): the heap only still.
        assert await vacuum() == "heap"
        assert await conn.fetchval(KEY_ENTRIES) == before

        await conn.execute("DELETE FROM werk_jobs WHERE jid <= 'vacuum-0200'")
        await changed_reaches(start + 200)
        # 200 >= 100 + 0.5 * 150: whole, and the key index holds the 100 rows left.
        assert await vacuum() == "whole"
        assert await conn.fetchval(KEY_ENTRIES) == 100
        # Nothing changed since: no pass at all.
        assert await vacuum() == "skip"

        await conn.execute("DELETE FROM werk_jobs WHERE jid <= 'vacuum-0210'")
        await changed_reaches(start + 210)
        assert await vacuum() == "heap"
        assert await conn.fetchval(KEY_ENTRIES) == 100
        # Idle after a heap-only pass: the next one is whole, so an idle table ends up clean.
        assert await vacuum() == "whole"
        assert await conn.fetchval(KEY_ENTRIES) == 90
        assert await vacuum() == "skip"
    finally:
        await pool.close()
        await conn.close()


async def _noop(_payload):
    return None


async def _none(_queues):
    return []


async def _zero(_pid):
    return 0


async def test_one_node_at_a_time_vacuums_the_job_table(database_url):
    from werk.db.queries import VACUUM_LOCK_KEY, vacuum_jobs

    pool = await create_pool(database_url, min_size=1, max_size=2)
    other = await asyncpg.connect(database_url)
    try:
        assert await vacuum_jobs(pool) is not None
        await other.execute("SELECT pg_advisory_lock($1)", VACUUM_LOCK_KEY)
        assert await vacuum_jobs(pool) is None  # another node holds it
        await other.execute("SELECT pg_advisory_unlock($1)", VACUUM_LOCK_KEY)
        assert await vacuum_jobs(pool) is not None
    finally:
        await other.close()
        await pool.close()
