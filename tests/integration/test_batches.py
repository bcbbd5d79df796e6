"""Batches over HTTP: jobs join an open batch by its bid; its callbacks are stored waiting and
each is released once, in the transaction that meets its condition (complete: every member
settled; success: every member completed; death: the first member ended badly); child batches
count as members of their parent; a batch reopened from inside a member takes more work; a dead
member retried that then completes still brings success."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.support.helpers import sql
from werk.domain.batches import MAX_DEPTH


async def new_batch(api, status=201, **body):
    r = await api.http.post("/v1/batches", json=body)
    assert r.status_code == status, r.text
    return r.json()


async def get_batch(api, bid):
    r = await api.http.get(f"/v1/batches/{bid}")
    assert r.status_code == 200, r.text
    return r.json()


async def commit(api, bid, status=200):
    r = await api.http.post(f"/v1/batches/{bid}/commit")
    assert r.status_code == status, r.text
    return r.json()


async def push_many(api, jobs, status=201):
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == status, r.text
    return r.json()


async def fetch(api, count=100, queue="default"):
    r = await api.http.post("/v1/fetch", json={"queues": [queue], "wid": "w1", "count": count})
    assert r.status_code == 200, r.text
    return r.json()["jobs"]


async def ack(api, job):
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204, r.text


async def die(api, job):
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail",
        json={"lease": job["lease"], "errtype": "E", "message": "m", "retry": False},
    )
    assert r.status_code == 200, r.text


async def run_all(api, queue="default"):
    ran = []
    while jobs := await fetch(api, queue=queue):
        for job in jobs:
            ran.append(job)
            await ack(api, job)
    return ran


def callbacks(**kinds):
    return {f"on_{k}": {"jobtype": v, "queue": "callbacks"} for k, v in kinds.items()}


async def test_callbacks_wait_until_the_batch_finishes_then_run_once(api):
    b = await new_batch(api, description="fan", **callbacks(success="ok", complete="done"))
    assert b["state"] == "open" and b["total"] == 0
    assert b["on_success"]["state"] == "waiting" and b["on_complete"]["state"] == "waiting"
    assert b["on_death"] is None
    await push_many(api, [{"jobtype": "t", "batch": b["bid"]} for _ in range(5)])
    got = await get_batch(api, b["bid"])
    assert (got["total"], got["pending"], got["state"]) == (5, 5, "open")
    ran = await run_all(api)
    assert len(ran) == 5
    assert await fetch(api, queue="callbacks") == []  # not committed: not finished
    got = await commit(api, b["bid"])
    assert (got["state"], got["succeeded"], got["pending"]) == ("finished", 5, 0)
    cbs = await run_all(api, queue="callbacks")
    assert sorted(j["jobtype"] for j in cbs) == ["done", "ok"]
    got = await get_batch(api, b["bid"])
    assert got["on_success"]["state"] == "completed"
    assert got["on_complete"]["state"] == "completed"
    # A member shows its batch.
    job = (await api.http.get(f"/v1/jobs/{ran[0]['jid']}")).json()
    assert job["batch"] == b["bid"]


async def test_callbacks_count_as_pushed_and_processed(api, database_url):
    b = await new_batch(api, **callbacks(success="ok", complete="done", death="bad"))
    await commit(api, b["bid"])
    assert len(await run_all(api, queue="callbacks")) == 2
    (row,) = await sql(
        database_url,
        "SELECT sum(pushed) AS pushed, sum(processed) AS processed FROM werk_counters"
        " WHERE queue = 'callbacks'",
    )
    assert (row["pushed"], row["processed"]) == (3, 2)  # on_death skipped, never run
    metrics = (await api.http.get("/metrics")).text
    assert 'werk_jobs_pushed_total{queue="callbacks"} 3' in metrics


async def test_an_empty_batch_finishes_at_commit(api):
    b = await new_batch(api, **callbacks(success="ok", death="bad"))
    got = await commit(api, b["bid"])
    assert got["state"] == "finished" and got["succeeded_at"] is not None
    assert got["on_success"]["state"] == "available"
    assert got["on_death"]["state"] == "skipped"


async def test_a_death_fires_on_death_and_complete_but_not_success(api):
    b = await new_batch(api, **callbacks(success="ok", complete="done", death="bad"))
    await push_many(api, [{"jobtype": "t", "batch": b["bid"]} for _ in range(3)])
    await commit(api, b["bid"])
    first, second, third = await fetch(api)
    await die(api, first)
    got = await get_batch(api, b["bid"])
    assert got["dead"] == 1 and got["on_death"]["state"] == "available"
    assert got["on_complete"]["state"] == "waiting"
    await ack(api, second)
    await ack(api, third)
    got = await get_batch(api, b["bid"])
    assert (got["state"], got["succeeded"], got["dead"]) == ("finished", 2, 1)
    assert got["on_complete"]["state"] == "available"
    assert got["on_success"]["state"] == "waiting"
    # The dead member retried by an operator completes: the batch succeeds after all.
    r = await api.http.post(f"/v1/jobs/{first['jid']}/retry")
    assert r.status_code == 200, r.text
    got = await get_batch(api, b["bid"])
    assert (got["pending"], got["dead"]) == (1, 0)
    (again,) = await fetch(api)
    await ack(api, again)
    got = await get_batch(api, b["bid"])
    assert got["succeeded"] == 3 and got["succeeded_at"] is not None
    assert got["on_success"]["state"] == "available"
    cbs = await run_all(api, queue="callbacks")
    assert sorted(j["jobtype"] for j in cbs) == ["bad", "done", "ok"]


async def test_joining_a_committed_or_unknown_batch_is_refused_and_stores_nothing(
    api, database_url
):
    b = await new_batch(api)
    await commit(api, b["bid"])
    r = await api.http.post(
        "/v1/jobs", json={"jobtype": "t", "batch": b["bid"], "jid": "j-closed-1"}
    )
    assert r.status_code == 409 and r.json()["code"] == "batch_finished", r.text
    b2 = await new_batch(api)
    await push_many(api, [{"jobtype": "t", "batch": b2["bid"]}])
    await commit(api, b2["bid"])
    r = await api.http.post("/v1/jobs", json={"jobtype": "t", "batch": b2["bid"]})
    assert r.status_code == 409 and r.json()["code"] == "batch_committed", r.text
    r = await api.http.post("/v1/jobs", json={"jobtype": "t", "batch": "b-nosuchbatch"})
    assert r.status_code == 404 and r.json()["code"] == "batch_not_found", r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    (row,) = await sql(database_url, "SELECT count(*) FROM werk_jobs WHERE jid = 'j-closed-1'")
    assert row[0] == 0
    r = await api.http.get("/v1/batches/b-nosuchbatch")
    assert r.status_code == 404 and r.json()["code"] == "batch_not_found"
    r = await api.http.post(f"/v1/batches/{b['bid']}/open")
    assert r.status_code == 409 and r.json()["code"] == "batch_finished"


async def test_a_member_reopens_its_batch_to_add_work_from_inside(api):
    b = await new_batch(api, **callbacks(success="ok"))
    await push_many(api, [{"jobtype": "first", "batch": b["bid"]}])
    await commit(api, b["bid"])
    (job,) = await fetch(api)
    # Inside the member: open its batch, push more, commit again, then finish.
    r = await api.http.post(f"/v1/batches/{job['batch']}/open")
    assert r.status_code == 200 and r.json()["state"] == "open", r.text
    await push_many(api, [{"jobtype": "more", "batch": b["bid"]} for _ in range(2)])
    await commit(api, b["bid"])
    await ack(api, job)
    got = await get_batch(api, b["bid"])
    assert (got["total"], got["pending"], got["state"]) == (3, 2, "committed")
    assert got["on_success"]["state"] == "waiting"
    assert len(await run_all(api)) == 2
    got = await get_batch(api, b["bid"])
    assert got["state"] == "finished" and got["on_success"]["state"] == "available"


async def test_nested_batches_count_as_members_and_deaths_propagate(api):
    parent = await new_batch(api, **callbacks(success="p-ok", complete="p-done", death="p-bad"))
    child = await new_batch(api, parent=parent["bid"], **callbacks(success="c-ok", death="c-bad"))
    await push_many(api, [{"jobtype": "t", "batch": parent["bid"]}])
    await push_many(api, [{"jobtype": "t", "batch": child["bid"]} for _ in range(2)])
    got = await get_batch(api, parent["bid"])
    assert got["total"] == 2 and got["children"] == [child["bid"]]
    assert (await get_batch(api, child["bid"]))["parent"] == parent["bid"]
    await commit(api, parent["bid"])
    r = await api.http.post("/v1/batches", json={"parent": parent["bid"]})
    assert r.status_code == 409 and r.json()["code"] == "batch_committed"
    await commit(api, child["bid"])
    jobs = await fetch(api)
    child_jobs = [j for j in jobs if j["batch"] == child["bid"]]
    await die(api, child_jobs[0])
    got = await get_batch(api, parent["bid"])
    assert got["died_at"] is not None and got["on_death"]["state"] == "available"
    assert got["dead"] == 0  # the child is still pending in its parent
    for j in jobs:
        if j is not child_jobs[0]:
            await ack(api, j)
    got = await get_batch(api, parent["bid"])
    assert (got["succeeded"], got["dead"], got["state"]) == (1, 1, "finished")
    assert got["on_complete"]["state"] == "available"
    assert got["on_success"]["state"] == "waiting"
    # Retried, the child's dead member completes: the child succeeds, then the parent.
    r = await api.http.post(f"/v1/jobs/{child_jobs[0]['jid']}/retry")
    assert r.status_code == 200
    (again,) = await fetch(api)
    await ack(api, again)
    got = await get_batch(api, parent["bid"])
    assert (got["succeeded"], got["dead"]) == (2, 0)
    assert got["on_success"]["state"] == "available"
    cbs = sorted(j["jobtype"] for j in await run_all(api, queue="callbacks"))
    assert cbs == ["c-bad", "c-ok", "p-bad", "p-done", "p-ok"]


async def test_a_callback_retries_like_any_job(api):
    b = await new_batch(api, on_success={"jobtype": "cb", "retry": 3})
    await commit(api, b["bid"])
    (cb,) = await fetch(api)
    r = await api.http.post(
        f"/v1/jobs/{cb['jid']}/fail", json={"lease": cb["lease"], "errtype": "E", "message": "m"}
    )
    assert r.json()["state"] == "scheduled"
    assert (await get_batch(api, b["bid"]))["on_success"]["state"] == "scheduled"


async def test_bad_batches_are_refused(api):
    await new_batch(api, 422, on_success={"jobtype": "cb", "at": "2030-01-01T00:00:00Z"})
    await new_batch(api, 404, parent="b-nosuchparent")
    await new_batch(api, 422, bogus=1)


async def test_the_admin_list_pages_newest_first(api):
    bids = [(await new_batch(api, description=f"d{i}"))["bid"] for i in range(3)]
    r = await api.http.get("/v1/batches", params={"limit": 2})
    page = r.json()
    assert [b["bid"] for b in page["batches"]] == bids[::-1][:2]
    r = await api.http.get("/v1/batches", params={"limit": 2, "cursor": page["next"]})
    assert [b["bid"] for b in r.json()["batches"]] == [bids[0]]
    assert r.json()["next"] is None


@pytest.mark.parametrize("cursor", ["\x00", "b-a\x00b", "not a bid", "\u00e9"])
async def test_a_cursor_that_is_no_bid_is_refused(api, cursor):
    r = await api.http.get("/v1/batches", params={"cursor": cursor})
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "invalid_request"
    assert r.json()["errors"][0]["loc"] == "cursor"


@pytest.mark.parametrize("action", ["cancel", "delete"])
async def test_a_member_cancelled_or_deleted_ends_badly(api, action):
    b = await new_batch(api, **callbacks(complete="done", death="bad"))
    (jid,) = (await push_many(api, [{"jobtype": "t", "batch": b["bid"]}]))["jids"]
    await commit(api, b["bid"])
    if action == "delete":
        r = await api.http.delete(f"/v1/jobs/{jid}")
    else:
        r = await api.http.post(f"/v1/jobs/{jid}/{action}")
    assert r.status_code in (200, 204), r.text
    got = await get_batch(api, b["bid"])
    assert (got["dead"], got["state"]) == (1, "finished")
    assert got["on_death"]["state"] == "available"


async def test_metrics_count_batches_and_callbacks_released(api):
    b = await new_batch(api, **callbacks(success="ok", death="bad"))
    await new_batch(api)
    await commit(api, b["bid"])
    r = await api.http.get("/metrics")
    assert 'werk_batches{state="open"} 1' in r.text
    assert 'werk_batches{state="finished"} 1' in r.text
    assert 'werk_batch_callbacks_released{kind="success"} 1' in r.text
    assert 'werk_batch_callbacks_released{kind="death"} 0' in r.text


async def test_retention_prunes_a_finished_batch_once_its_members_are_gone(api, database_url):
    days = 180
    b = await new_batch(api)
    await push_many(api, [{"jobtype": "t", "batch": b["bid"]}])
    await commit(api, b["bid"])
    api.clock.advance(days * 86400 + 1)
    await api.maintain()
    assert (await get_batch(api, b["bid"]))["pending"] == 1  # a member is stored: kept
    (member,) = await fetch(api)
    await ack(api, member)
    kept = await new_batch(api, **callbacks(success="ok"))
    (jid,) = (await push_many(api, [{"jobtype": "t", "batch": kept["bid"], "retry": -1}]))["jids"]
    await commit(api, kept["bid"])
    (job,) = await fetch(api)
    await die(api, job)
    assert (await get_batch(api, b["bid"]))["state"] == "finished"
    empty = await new_batch(api, **callbacks(death="bad"))
    await commit(api, empty["bid"])
    api.clock.advance(days * 86400 + 1)
    await api.maintain()
    # The pass prunes the dead member (dead retention) first, then both batches, with the
    # on_success callback the dead member kept waiting.
    r = await api.http.get(f"/v1/batches/{empty['bid']}")
    assert r.status_code == 404
    r = await api.http.get(f"/v1/batches/{kept['bid']}")
    assert r.status_code == 404
    r = await api.http.get(f"/v1/batches/{b['bid']}")
    assert r.status_code == 404
    rows = await sql(
        database_url,
        f"SELECT count(*) FROM werk_jobs WHERE jid IN ('{jid}', '{kept['on_success']['jid']}')",
    )
    assert rows[0][0] == 0


async def test_two_transactions_settling_the_last_members_release_the_callback_once(
    api, database_url
):
    """Each of the batch's last two members is acked in its own open transaction, which
    settles them as it commits (or, here, when its deferred constraints are made immediate):
    the second waits for the batch's row lock, then sees the first's count, so exactly one of
    them meets the condition and releases the callbacks."""
    b = await new_batch(api, **callbacks(success="ok", complete="done"))
    await push_many(api, [{"jobtype": "t", "batch": b["bid"]} for _ in range(2)])
    await commit(api, b["bid"])
    first, second = await fetch(api)
    one, two = await asyncpg.connect(database_url), await asyncpg.connect(database_url)
    try:
        t1, t2 = one.transaction(), two.transaction()
        await t1.start()
        await t2.start()
        assert await one.fetchval("SELECT werk.ack($1, $2)", first["jid"], first["lease"])
        await one.execute("SET CONSTRAINTS ALL IMMEDIATE")  # settles, holding the batch's row

        async def second_ack() -> bool:
            acked = await two.fetchval("SELECT werk.ack($1, $2)", second["jid"], second["lease"])
            await two.execute("SET CONSTRAINTS ALL IMMEDIATE")
            return bool(acked)

        waiting = asyncio.create_task(second_ack())
        await asyncio.sleep(0.3)
        assert not waiting.done()  # held by the first's locks (the batch's row)
        await t1.commit()
        assert await waiting
        await t2.commit()
    finally:
        await one.close()
        await two.close()
    got = await get_batch(api, b["bid"])
    assert (got["succeeded"], got["state"]) == (2, "finished")
    assert got["on_success"]["state"] == got["on_complete"]["state"] == "available"
    assert sorted(j["jobtype"] for j in await run_all(api, queue="callbacks")) == ["done", "ok"]


async def test_a_death_three_levels_down_reaches_every_ancestor_once(api):
    top = await new_batch(api, **callbacks(death="top-bad", complete="top-done"))
    mid = await new_batch(api, parent=top["bid"], **callbacks(death="mid-bad"))
    low = await new_batch(api, parent=mid["bid"], **callbacks(death="low-bad"))
    await push_many(api, [{"jobtype": "t", "batch": low["bid"], "retry": -1} for _ in range(2)])
    for b in (low, mid, top):
        await commit(api, b["bid"])
    first, second = await fetch(api)
    await die(api, first)
    await die(api, second)
    cbs = sorted(j["jobtype"] for j in await run_all(api, queue="callbacks"))
    assert cbs == ["low-bad", "mid-bad", "top-bad", "top-done"]
    got = await get_batch(api, top["bid"])
    assert (got["dead"], got["succeeded"], got["state"]) == (1, 0, "finished")
    assert (await get_batch(api, mid["bid"]))["dead"] == 1


async def test_batches_nest_at_most_max_depth_and_the_deepest_member_settles(api):
    parent = None
    bids = []
    for _ in range(MAX_DEPTH):
        b = await new_batch(
            api, **({"parent": parent} if parent else {}), **callbacks(complete="c")
        )
        parent = b["bid"]
        bids.append(parent)
    r = await api.http.post("/v1/batches", json={"parent": parent})
    assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    assert r.json()["errors"] == [{"loc": "parent", "message": f"at depth {MAX_DEPTH}"}]
    assert (await get_batch(api, parent))["total"] == 0  # the refused child was not counted
    await push_many(api, [{"jobtype": "leaf", "queue": "deep", "batch": parent}])
    for bid in reversed(bids):
        await commit(api, bid)
    assert len(await run_all(api, queue="deep")) == 1
    assert (await get_batch(api, bids[0]))["state"] == "finished"
    assert len(await run_all(api, queue="callbacks")) == MAX_DEPTH


@pytest.mark.parametrize("kind", ["success", "complete", "death"])
async def test_no_job_can_settle_a_batchs_callback_edge(api, kind):
    b = await new_batch(api, **callbacks(**{kind: "cb"}))
    await push_many(api, [{"jobtype": "t", "batch": b["bid"]}])
    await commit(api, b["bid"])
    for forged in (f"{b['bid']}:{kind}", f"{b['bid']}/{kind}"):
        body = {"jid": forged, "jobtype": "forged", "queue": "forged"}
        r = await api.http.post("/v1/jobs", json=body)
        if r.status_code == 201:  # the colon is a jid's; the slash is not
            # A job depending on it marks it as depended on: its settling then settles every
            # edge named by its jid.
            r = await api.http.post(
                "/v1/jobs", json={"jobtype": "x", "queue": "other", "depends_on": [forged]}
            )
            assert r.status_code == 201, r.text
            (job,) = await fetch(api, queue="forged")
            assert job["jid"] == forged
            await die(api, job)  # settles, badly, whatever waits on its jid
        else:
            assert r.status_code == 422, r.text
    got = await get_batch(api, b["bid"])
    assert got[f"on_{kind}"]["state"] == "waiting" and got["pending"] == 1
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "depends_on": [f"{b['bid']}/{kind}"]})
    assert r.status_code == 422, r.text
