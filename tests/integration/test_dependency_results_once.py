"""A completed dependency's result is stored once (werk_dep_results, migration 26), however many
dependents read it: each completed edge names it, and its row counts those edges (refs), so
that it goes with the last of them. The counts stay exact while dependents are pushed and
deleted concurrently, and every dependent reads the result as it did when each edge held a
copy."""

from __future__ import annotations

import asyncio
import json
import random

from tests.integration.test_dependencies import ack, batch, fetch, push
from tests.support.helpers import sql

LARGE = {"pad": "x" * 50_000}


async def stored(database_url):
    """Every stored result: (dep, refs, result_size)."""
    rows = await sql(
        database_url, "SELECT dep, refs, result_size FROM werk_dep_results ORDER BY dep"
    )
    return [tuple(r) for r in rows]


async def consistent(database_url):
    """Every completed edge with a result finds its row, and each row counts exactly the edges
    that name it (no row is left without one)."""
    rows = await sql(
        database_url,
        """
        SELECT coalesce(r.dep, e.dep) AS dep, r.refs, coalesce(e.n, 0) AS n
        FROM werk_dep_results r
        FULL JOIN (SELECT dep, result_at, count(*)::int AS n
                   FROM werk_job_deps
                   WHERE result_at IS NOT NULL
                   GROUP BY dep, result_at) e
          ON e.dep = r.dep AND e.result_at = r.completed_at
        WHERE r.refs IS DISTINCT FROM e.n
        """,
    )
    assert rows == []
    (row,) = await sql(
        database_url,
        "SELECT count(*) FROM werk_job_deps WHERE outcome = 'completed' AND result_at IS NULL"
        " AND dep IN (SELECT jid FROM werk_completed_jobs WHERE result IS NOT NULL)",
    )
    assert row[0] == 0


async def delete(api, jid):
    r = await api.http.delete(f"/v1/jobs/{jid}")
    assert r.status_code == 204, r.text


async def test_a_fan_out_stores_its_result_once_until_its_last_dependent_goes(api, database_url):
    n = 150
    await push(api, jid="once-dep", queue="deps")
    await batch(api, [{"jobtype": "t", "jid": f"once-{i:03}", "depends_on": ["once-dep"]}
                      for i in range(n)])  # fmt: skip
    (dep,) = await fetch(api, queue="deps")
    await ack(api, dep, LARGE)
    size = len(json.dumps(LARGE).encode())
    assert await stored(database_url) == [("once-dep", n, size)]
    # Every dependent reads it, from a fetch and from a read of the job (ten to a fetch: an
    # answer carries at most WERK_MAX_DEPENDENCY_RESULTS_BYTES of results).
    fetched = []
    while jobs := await fetch(api, count=10):
        fetched += jobs
    assert sorted(j["jid"] for j in fetched) == [f"once-{i:03}" for i in range(n)]
    for job in fetched:
        (d,) = job["dependencies"]
        assert d["jid"] == "once-dep" and d["outcome"] == "completed" and d["result"] == LARGE
        assert "result_omitted" not in d
    by_jid = {j["jid"]: j["dependencies"] for j in fetched}
    assert (await api.http.get("/v1/jobs/once-007")).json()["dependencies"] == by_jid["once-007"]
    # An operator's deletion of dependents takes their count off; the last one takes the row.
    for i in range(n - 1):
        await delete(api, f"once-{i:03}")
    assert await stored(database_url) == [("once-dep", 1, size)]
    await consistent(database_url)
    await delete(api, f"once-{n - 1:03}")
    assert await stored(database_url) == []
    assert await sql(database_url, "SELECT count(*) FROM werk_job_deps") == [(0,)]


async def test_acked_dependents_take_their_count_with_them(api, database_url):
    await push(api, jid="acked-dep", queue="deps")
    for i in range(3):
        await push(api, jid=f"acked-job-{i}", depends_on=["acked-dep"])
    (dep,) = await fetch(api, queue="deps")
    await ack(api, dep, {"rows": 3})
    jobs = await fetch(api)
    await ack(api, jobs[0])
    assert await stored(database_url) == [("acked-dep", 2, len('{"rows": 3}'))]
    for job in jobs[1:]:
        await ack(api, job)
    assert await stored(database_url) == []


async def test_no_result_no_row(api, database_url):
    await push(api, jid="quiet-dep", queue="deps")
    await push(api, jid="failing-dep", queue="deps", retry=-1)
    await push(api, jid="quiet-child", depends_on=["quiet-dep"])
    await push(
        api, jid="ignoring-child", depends_on=[{"job": "failing-dep", "on_failure": "ignore"}]
    )
    deps = {j["jid"]: j for j in await fetch(api, queue="deps")}
    quiet, failing = deps["quiet-dep"], deps["failing-dep"]
    await ack(api, quiet)
    r = await api.http.post(
        f"/v1/jobs/{failing['jid']}/fail",
        json={"lease": failing["lease"], "errtype": "E", "message": "m"},
    )
    assert r.status_code == 200, r.text
    got = {j["jid"]: j["dependencies"][0] for j in await fetch(api)}
    assert got["quiet-child"]["outcome"] == "completed" and got["quiet-child"]["result"] is None
    assert got["ignoring-child"]["outcome"] == "dead" and got["ignoring-child"]["result"] is None
    assert await stored(database_url) == []


async def test_a_kept_result_pushed_as_a_dependency_later_raises_its_count(api, database_url):
    await push(api, jid="kept-dep", queue="deps", keep_result_for=3600)
    await push(api, jid="kept-early", depends_on=["kept-dep"])
    (dep,) = await fetch(api, queue="deps")
    await ack(api, dep, LARGE)
    size = len(json.dumps(LARGE).encode())
    assert await stored(database_url) == [("kept-dep", 1, size)]
    # Pushed one by one and in a batch, after the ack: the same row counts them.
    later = await push(api, jid="kept-later", depends_on=["kept-dep"])
    assert later["state"] == "available"
    await batch(api, [{"jobtype": "t", "jid": f"kept-batch-{i}", "depends_on": ["kept-dep"]}
                      for i in range(3)])  # fmt: skip
    assert await stored(database_url) == [("kept-dep", 5, size)]
    fetched = await fetch(api)
    assert len(fetched) == 5
    assert all(j["dependencies"][0]["result"] == LARGE for j in fetched)
    # Once every dependent is gone the row goes; a dependent pushed after that stores it again.
    for job in fetched:
        await ack(api, job)
    assert await stored(database_url) == []
    await push(api, jid="kept-last", depends_on=["kept-dep"])
    assert await stored(database_url) == [("kept-dep", 1, size)]
    (job,) = await fetch(api)
    assert job["dependencies"][0]["result"] == LARGE
    await consistent(database_url)


async def test_a_jid_used_again_keeps_each_completion_s_result(make_api, database_url):
    """A dependency's jid is free again once its completed job is pruned: the next job of that
    jid completes with a result of its own, and the dependents of each read their own."""
    api = await make_api(completed_retention=0)
    await push(api, jid="again-dep", queue="deps")
    await push(api, jid="again-old", depends_on=["again-dep"])
    (dep,) = await fetch(api, queue="deps")
    await ack(api, dep, "first")
    r = await api.http.post("/v1/jobs/again-old/cancel")  # kept, with its edge
    assert r.status_code == 200, r.text
    api.clock.advance(10)
    await api.maintain()
    (row,) = await sql(
        database_url, "SELECT count(*) FROM werk_stored_jobs WHERE jid = 'again-dep'"
    )
    assert row[0] == 0
    await push(api, jid="again-dep", queue="deps")
    await push(api, jid="again-new", depends_on=["again-dep"])
    (dep,) = await fetch(api, queue="deps")
    await ack(api, dep, "second")
    (job,) = await fetch(api)
    assert job["jid"] == "again-new" and job["dependencies"][0]["result"] == "second"
    old = (await api.http.get("/v1/jobs/again-old")).json()["dependencies"]
    assert old[0]["result"] == "first"
    assert sorted(r for _, r, _ in await stored(database_url)) == [1, 1]
    await consistent(database_url)


async def test_pushes_and_deletions_of_dependents_race_and_the_counts_stay_exact(
    make_api, database_url
):
    """Many concurrent pushes of new dependents of a kept completed job race with deletions of
    its other dependents, through several rounds in which the count reaches zero (the row is
    deleted) while pushes add to it (an upsert meeting a row being deleted inserts it again)."""
    api = await make_api(pool_max_size=12, admin_pool_max_size=12)
    await push(api, jid="race-dep", queue="deps", keep_result_for=3600)
    (dep,) = await fetch(api, queue="deps")
    await ack(api, dep, LARGE)
    size = len(json.dumps(LARGE).encode())

    async def pushed(jid, **extra):
        r = await api.http.post(
            "/v1/jobs", json={"jobtype": "t", "jid": jid, "depends_on": ["race-dep"], **extra}
        )
        assert r.status_code == 201, r.text

    async def pushed_batch(jids):
        await batch(api, [{"jobtype": "t", "jid": j, "depends_on": ["race-dep"]} for j in jids])

    async def soon(pause, work):
        await asyncio.sleep(pause)
        await work

    alive = [f"race-first-{i}" for i in range(6)]
    await pushed_batch(alive)
    for rnd in range(20):
        # The dependents left are deleted while as many new ones are pushed, each after a short
        # random pause: in some rounds the count reaches zero (the row is deleted) before a push
        # adds to it, in others a push adds to it first.
        rng = random.Random(rnd)
        later = rng.choice([0.0, 0.005, 0.01, 0.02, 0.04])  # how much later pushes start
        doomed = alive
        alive = [f"race-{rnd}-new-{i}" for i in range(6)]
        work = [soon(rng.uniform(0, 0.01), delete(api, jid)) for jid in doomed]
        work += [soon(rng.uniform(0, 0.01) + later, pushed(jid)) for jid in alive[:3]]
        work.append(soon(rng.uniform(0, 0.01) + later, pushed_batch(alive[3:])))
        await asyncio.gather(*work)
        await consistent(database_url)
        assert await stored(database_url) == [("race-dep", len(alive), size)]
    # Every dependent left reads the result, and deleting them all, concurrently, takes the row.
    while jobs := await fetch(api, count=10):
        assert all(j["dependencies"][0]["result"] == LARGE for j in jobs)
    await asyncio.gather(*(delete(api, jid) for jid in alive))
    assert await stored(database_url) == []
    await consistent(database_url)
