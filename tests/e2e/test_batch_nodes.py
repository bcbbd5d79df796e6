"""Batches across two real server processes sharing one database: a fan-out of 10,000 members
worked from both nodes runs its on_success callback exactly once, and batches whose last two
members are acked at the same moment on different nodes each finish once, counted right."""

from __future__ import annotations

import asyncio
import random
import uuid

import httpx

from tests.support.helpers import sql


async def new_batch(http, url, **body):
    r = await http.post(url + "/v1/batches", json=body)
    assert r.status_code == 201, r.text
    return r.json()["bid"]


async def work(http, url, wid, queue="default"):
    """Fetch and batch-ack until the queue stays empty; returns the jobs run."""
    ran = []
    empty = 0
    while empty < 3:
        r = await http.post(
            url + "/v1/fetch", json={"queues": [queue], "wid": wid, "count": 100, "wait": 0.5}
        )
        jobs = r.json()["jobs"]
        if not jobs:
            empty += 1
            continue
        empty = 0
        ran += jobs
        acks = [{"jid": j["jid"], "lease": j["lease"]} for j in jobs]
        r = await http.post(url + "/v1/ack", json={"acks": acks})
        assert r.status_code == 200 and r.json()["lease_lost"] == [], r.text
    return ran


async def test_a_fan_out_of_10000_runs_on_success_once(werk_server_factory, database_url):
    a = werk_server_factory()
    b = werk_server_factory()
    async with httpx.AsyncClient(timeout=60) as http:
        bid = await new_batch(
            http, a.url, description="fan-out",
            on_success={"jobtype": "fan-in", "queue": "fan-in"},
            on_complete={"jobtype": "fan-done", "queue": "fan-in"},
        )  # fmt: skip
        for chunk in range(10):
            jobs = [{"jobtype": "t", "args": [chunk, i], "batch": bid} for i in range(1000)]
            r = await http.post(
                (a if chunk % 2 else b).url + "/v1/jobs/batch",
                json={"jobs": jobs},
                headers={"Prefer": "return=minimal"},
            )
            assert r.status_code == 201, r.text
        r = await http.post(f"{b.url}/v1/batches/{bid}/commit")
        assert r.json()["state"] == "committed" and r.json()["total"] == 10_000
        ran = await asyncio.gather(
            *(work(http, n.url, f"w{i}") for i, n in enumerate((a, b, a, b)))
        )
        assert sum(len(r) for r in ran) == 10_000
        assert len({j["jid"] for r in ran for j in r}) == 10_000
        callbacks = await asyncio.gather(
            work(http, a.url, "cb-a", "fan-in"), work(http, b.url, "cb-b", "fan-in")
        )
        assert sorted(j["jobtype"] for c in callbacks for j in c) == ["fan-done", "fan-in"]
        r = await http.get(f"{a.url}/v1/batches/{bid}")
        got = r.json()
        assert (got["succeeded"], got["dead"], got["pending"], got["state"]) == (
            10_000, 0, 0, "finished"
        )  # fmt: skip
        assert got["on_success"]["state"] == "completed"
    (row,) = await sql(
        database_url, "SELECT count(*) FROM werk_stored_jobs WHERE jobtype = 'fan-in'"
    )
    assert row[0] == 1


async def test_last_members_settled_at_once_on_two_nodes_finish_each_batch_once(
    werk_server_factory, database_url
):
    a = werk_server_factory()
    b = werk_server_factory()
    rounds = 30
    async with httpx.AsyncClient(timeout=60) as http:
        bids = []
        for i in range(rounds):
            bid = await new_batch(
                http, a.url, on_success={"jobtype": "cb", "queue": "cbs", "args": [i]},
                on_complete={"jobtype": "done", "queue": "cbs", "args": [i]},
            )  # fmt: skip
            jobs = [{"jobtype": "t", "queue": f"q{i}", "batch": bid} for _ in range(2)]
            r = await http.post(a.url + "/v1/jobs/batch", json={"jobs": jobs})
            assert r.status_code == 201, r.text
            r = await http.post(f"{a.url}/v1/batches/{bid}/commit")
            assert r.status_code == 200
            bids.append(bid)
        for i in range(rounds):
            r = await http.post(
                a.url + "/v1/fetch", json={"queues": [f"q{i}"], "wid": "w", "count": 2}
            )
            first, second = r.json()["jobs"]
            # Both last members acked at the same moment, one on each node.
            answers = await asyncio.gather(
                http.post(f"{a.url}/v1/jobs/{first['jid']}/ack", json={"lease": first["lease"]}),
                http.post(f"{b.url}/v1/jobs/{second['jid']}/ack", json={"lease": second["lease"]}),
            )
            assert [x.status_code for x in answers] == [204, 204], [x.text for x in answers]
        ran = await asyncio.gather(work(http, a.url, "c1", "cbs"), work(http, b.url, "c2", "cbs"))
        fired = sorted((j["jobtype"], j["args"][0]) for r in ran for j in r)
        assert fired == sorted(
            [("cb", i) for i in range(rounds)] + [("done", i) for i in range(rounds)]
        )
        for bid in bids:
            got = (await http.get(f"{b.url}/v1/batches/{bid}")).json()
            assert (got["succeeded"], got["state"]) == (2, "finished"), got
    rows = await sql(
        database_url,
        "SELECT count(*) FROM werk_batches WHERE succeeded_at IS NOT NULL AND succeeded = 2",
    )
    assert rows[0][0] == rounds


async def test_bulk_acks_over_shared_batches_and_dependents_never_deadlock(
    werk_server_factory, database_url
):
    """Bulk acks on two nodes, each over members of every batch and of every shared dependent
    in its own order: every settling takes the batch rows and the dependents in one fixed
    order, so none waits for another in a cycle, and every count comes out exact."""
    a = werk_server_factory()
    b = werk_server_factory()
    rng = random.Random(32)
    batches, dependents, members, groups = 4, 4, 240, 24
    async with httpx.AsyncClient(timeout=120) as http:
        for round_ in range(4):
            queue = f"r{round_}"
            bids = []
            for _ in range(batches):
                cbs = {"queue": f"cb{round_}"}
                bid = await new_batch(
                    http, a.url, on_success={"jobtype": "cb", **cbs},
                    on_complete={"jobtype": "done", **cbs},
                )  # fmt: skip
                bids.append(bid)
            jids = [uuid.uuid4().hex for _ in range(members)]
            jobs = [
                {"jid": jid, "jobtype": "t", "queue": queue, "batch": bids[i % batches]}
                for i, jid in enumerate(jids)
            ]
            r = await http.post(a.url + "/v1/jobs/batch", json={"jobs": jobs})
            assert r.status_code == 201, r.text
            # Each dependent waits on a random half of the members, across every batch.
            waits = [rng.sample(jids, members // 2) for _ in range(dependents)]
            deps = [
                {"jobtype": "dep", "queue": f"dep{round_}", "depends_on": w, "args": [d]}
                for d, w in enumerate(waits)
            ]
            r = await http.post(b.url + "/v1/jobs/batch", json={"jobs": deps})
            assert r.status_code == 201, r.text
            for bid in bids:
                r = await http.post(f"{a.url}/v1/batches/{bid}/commit")
                assert r.status_code == 200, r.text
            fetched = []
            while len(fetched) < members:
                r = await http.post(
                    a.url + "/v1/fetch", json={"queues": [queue], "wid": "w", "count": 100}
                )
                assert r.status_code == 200 and r.json()["jobs"], r.text
                fetched += r.json()["jobs"]
            assert len(fetched) == members
            rng.shuffle(fetched)
            size = members // groups
            answers = await asyncio.gather(
                *(
                    http.post(
                        (a if g % 2 else b).url + "/v1/ack",
                        json={
                            "acks": [
                                {"jid": j["jid"], "lease": j["lease"]}
                                for j in fetched[g * size : (g + 1) * size]
                            ]
                        },
                    )
                    for g in range(groups)
                )
            )
            for x in answers:
                assert x.status_code == 200 and x.json()["lease_lost"] == [], x.text
            for bid in bids:
                got = (await http.get(f"{b.url}/v1/batches/{bid}")).json()
                assert (got["succeeded"], got["dead"], got["pending"], got["state"]) == (
                    members // batches, 0, 0, "finished"
                ), got  # fmt: skip
            r = await http.post(
                b.url + "/v1/fetch",
                json={"queues": [f"dep{round_}"], "wid": "w", "count": 100, "wait": 1},
            )
            assert sorted(j["args"][0] for j in r.json()["jobs"]) == list(range(dependents))
            r = await http.post(
                a.url + "/v1/fetch",
                json={"queues": [f"cb{round_}"], "wid": "w", "count": 100, "wait": 1},
            )
            assert (
                sorted(j["jobtype"] for j in r.json()["jobs"])
                == ["cb"] * batches + ["done"] * batches
            )
    rows = await sql(
        database_url,
        "SELECT count(*) FROM werk_job_deps WHERE outcome IS NULL AND dep NOT LIKE '%:death'",
    )
    assert rows[0][0] == 0
