"""Job dependencies over HTTP: a job pushed with depends_on waits until its dependencies settle
and is released in the transaction that settles the last one; a batch pushes a whole graph by
ref; results reach the dependents; a dependency that ends badly finishes its dependents by
their policy, down the graph, so nothing is left waiting; bad graphs change nothing."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest

from tests.support.helpers import sql


async def push(api, **job):
    job.setdefault("jobtype", "t")
    r = await api.http.post("/v1/jobs", json=job)
    assert r.status_code == 201, r.text
    return r.json()


async def batch(api, jobs, status=201):
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == status, r.text
    return r.json()


async def fetch(api, count=100, queue="default"):
    r = await api.http.post("/v1/fetch", json={"queues": [queue], "wid": "w1", "count": count})
    assert r.status_code == 200, r.text
    return r.json()["jobs"]


async def ack(api, job, result=None):
    body = {"lease": job["lease"]} if result is None else {"lease": job["lease"], "result": result}
    r = await api.http.post(f"/v1/jobs/{job['jid']}/ack", json=body)
    assert r.status_code == 204, r.text


async def fail(api, job, **body):
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail",
        json={"lease": job["lease"], "errtype": "E", "message": "m", **body},
    )
    assert r.status_code == 200, r.text


async def state(api, jid):
    r = await api.http.get(f"/v1/jobs/{jid}")
    return r.json()["state"] if r.status_code == 200 else None


async def run_all_batched(api):
    """As run_all, each fetch's jobs acked in one batch ack; returns the jids run."""
    ran = []
    while jobs := await fetch(api):
        ran += [j["jid"] for j in jobs]
        acks = [{"jid": j["jid"], "lease": j["lease"]} for j in jobs]
        r = await api.http.post("/v1/ack", json={"acks": acks})
        assert r.status_code == 200 and r.json()["lease_lost"] == [], r.text
    return ran


async def run_all(api, results=None):
    """Fetch and ack until nothing is available; returns the jids run, in order."""
    ran = []
    while jobs := await fetch(api):
        for job in jobs:
            ran.append(job["jid"])
            await ack(api, job, (results or {}).get(job["jid"]))
    return ran


async def count(database_url, query):
    (row,) = await sql(database_url, query)
    return row[0]


async def waiting_count(database_url):
    return await count(database_url, "SELECT count(*) FROM werk_jobs WHERE state = 'waiting'")


async def test_a_dependent_waits_and_receives_the_result_of_its_dependency(api, database_url):
    await push(api, jid="dep-parent-1")
    child = await push(api, jid="dep-child-1", depends_on=["dep-parent-1"])
    assert child["state"] == "waiting" and child["enqueued_at"] is None
    (parent,) = await fetch(api)
    assert parent["jid"] == "dep-parent-1" and "dependencies" not in parent
    got = (await api.http.get("/v1/jobs/dep-parent-1")).json()
    assert got["dependents"] == [{"jid": "dep-child-1", "state": "waiting", "on_failure": "fail"}]
    await ack(api, parent, {"rows": 7})
    (fetched,) = await fetch(api)
    assert fetched["jid"] == "dep-child-1"
    (dep,) = fetched["dependencies"]
    assert dep["jid"] == "dep-parent-1" and dep["ref"] is None
    assert dep["outcome"] == "completed" and dep["result"] == {"rows": 7}
    # The dependency was kept only to be seen completed; its result is stored once for its
    # edges (werk_dep_results), and goes with the last of them.
    assert await state(api, "dep-parent-1") == "completed"
    assert await count(database_url, "SELECT refs FROM werk_dep_results") == 1
    await ack(api, fetched)
    assert await count(database_url, "SELECT count(*) FROM werk_job_deps") == 0
    assert await count(database_url, "SELECT count(*) FROM werk_dep_results") == 0


async def test_a_dependent_with_a_later_at_is_released_as_scheduled(api):
    at = api.clock.now() + timedelta(hours=1)
    await push(api, jid="dep-at-parent")
    await push(api, jid="dep-at-child", at=at.isoformat(), depends_on=["dep-at-parent"])
    (parent,) = await fetch(api)
    await ack(api, parent)
    got = (await api.http.get("/v1/jobs/dep-at-child")).json()
    assert got["state"] == "scheduled" and got["enqueued_at"] is None
    assert await fetch(api) == []


async def test_a_dag_by_ref_all_or_nothing_and_the_refs_answered(api):
    answer = await batch(
        api,
        [
            {"jobtype": "t", "ref": "a"},
            {"jobtype": "t", "ref": "b", "depends_on": ["a"]},
            {"jobtype": "t", "ref": "c", "depends_on": ["a"]},
            {"jobtype": "t", "ref": "d", "depends_on": ["b", "c"]},
        ],
    )
    refs = answer["refs"]
    assert set(refs) == {"a", "b", "c", "d"} and answer["jids"] == [refs[r] for r in "abcd"]
    assert [j["state"] for j in answer["jobs"]] == ["available", "waiting", "waiting", "waiting"]
    (a,) = await fetch(api)
    assert a["jid"] == refs["a"]
    await ack(api, a, "A")
    bc = await fetch(api)
    assert {j["jid"] for j in bc} == {refs["b"], refs["c"]}
    await ack(api, bc[0], bc[0]["jid"])
    assert await fetch(api) == []  # d waits for the other
    await ack(api, bc[1], bc[1]["jid"])
    (d,) = await fetch(api)
    assert d["jid"] == refs["d"]
    assert {x["ref"]: x["result"] for x in d["dependencies"]} == {
        "b": refs["b"],
        "c": refs["c"],
    }


async def test_a_chain_of_100_runs_in_order(api, database_url):
    jobs = [{"jobtype": "t", "ref": "n0"}] + [
        {"jobtype": "t", "ref": f"n{i}", "depends_on": [f"n{i - 1}"]} for i in range(1, 100)
    ]
    answer = await batch(api, jobs)
    ran = await run_all(api)
    assert ran == [answer["refs"][f"n{i}"] for i in range(100)]
    assert await waiting_count(database_url) == 0


@pytest.mark.parametrize(
    ("items", "code"),
    [
        ([{"jobtype": "t", "ref": "a", "depends_on": ["b"]}, {"jobtype": "t", "ref": "b",
          "depends_on": ["a"]}], "dependency_cycle"),
        ([{"jobtype": "t", "ref": "a", "depends_on": ["a"]}], "dependency_cycle"),
        ([{"jobtype": "t", "ref": "a", "depends_on": ["zz"]}], "dependency_not_found"),
        ([{"jobtype": "t", "ref": "a", "depends_on": ["no-such-job-1"]}], "dependency_not_found"),
        ([{"jobtype": "t", "ref": "a"}, {"jobtype": "t", "ref": "a"}], "invalid_request"),
        ([{"jobtype": "t", "ref": "a"}, {"jobtype": "t", "depends_on": ["a", "a"]}],
         "invalid_request"),
    ],
)  # fmt: skip
async def test_a_bad_graph_is_refused_and_stores_nothing(api, database_url, items, code):
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "t"}, *items]})
    assert r.status_code == 422, r.text
    assert r.json()["code"] == code
    assert await count(database_url, "SELECT count(*) FROM werk_jobs") == 0
    assert await count(database_url, "SELECT count(*) FROM werk_job_deps") == 0


async def test_a_kept_completed_dependency_counts_as_completed_with_its_result(api):
    await push(api, jid="dep-done-1", keep_result_for=600)
    (job,) = await fetch(api)
    await ack(api, job, [1, 2])
    child = await push(api, jid="dep-after-1", depends_on=["dep-done-1"])
    assert child["state"] == "available"
    (fetched,) = await fetch(api)
    assert fetched["dependencies"][0]["result"] == [1, 2]


@pytest.mark.parametrize(
    ("policy", "child_state", "grandchild_state"),
    [("fail", "dead", "dead"), ("skip", "skipped", "skipped"), ("ignore", "available", "waiting")],
)
async def test_a_dead_dependency_under_each_policy(
    api, database_url, policy, child_state, grandchild_state
):
    answer = await batch(
        api,
        [
            {"jobtype": "t", "ref": "p", "retry": -1},
            {"jobtype": "t", "ref": "c", "depends_on": [{"job": "p", "on_failure": policy}]},
            {"jobtype": "t", "ref": "g", "depends_on": ["c"]},
        ],
    )
    refs = answer["refs"]
    (p,) = await fetch(api)
    await fail(api, p)
    assert await state(api, refs["p"]) == "dead"
    assert await state(api, refs["c"]) == child_state
    assert await state(api, refs["g"]) == grandchild_state
    if policy == "fail":
        got = (await api.http.get(f"/v1/jobs/{refs['g']}")).json()
        assert got["failure"]["errtype"] == "DependencyFailed"
        assert refs["c"] in got["failure"]["message"]
    if policy == "ignore":
        ran = await run_all(api)
        assert ran == [refs["c"], refs["g"]]
    assert await waiting_count(database_url) == 0


async def test_a_skipped_dependency_skips_its_dependents_under_fail(api):
    answer = await batch(
        api,
        [
            {"jobtype": "t", "ref": "p", "retry": -1},
            {"jobtype": "t", "ref": "c", "depends_on": ["p"], "on_dependency_failure": "skip"},
            {"jobtype": "t", "ref": "g", "depends_on": ["c"]},
        ],
    )
    (p,) = await fetch(api)
    await fail(api, p)
    assert await state(api, answer["refs"]["c"]) == "skipped"
    assert await state(api, answer["refs"]["g"]) == "skipped"


@pytest.mark.parametrize("action", ["kill", "cancel", "delete"])
async def test_an_operator_settling_a_dependency_releases_nothing_forever(
    api, database_url, action
):
    await push(api, jid="dep-op-parent")
    await push(api, jid="dep-op-child", depends_on=["dep-op-parent"])
    await push(api, jid="dep-op-other", depends_on=[
        {"job": "dep-op-parent", "on_failure": "ignore"}])  # fmt: skip
    if action == "delete":
        r = await api.http.delete("/v1/jobs/dep-op-parent")
    else:
        r = await api.http.post(f"/v1/jobs/dep-op-parent/{action}")
    assert r.status_code in (200, 204), r.text
    assert await state(api, "dep-op-child") == "dead"
    assert await state(api, "dep-op-other") == "available"
    got = (await api.http.get("/v1/jobs/dep-op-other")).json()
    outcome = {"kill": "dead", "cancel": "cancelled", "delete": "deleted"}[action]
    assert got["dependencies"][0]["outcome"] == outcome
    assert await waiting_count(database_url) == 0


async def test_a_waiting_job_can_be_cancelled_and_deleted(api, database_url):
    await push(api, jid="dep-w-parent")
    await push(api, jid="dep-w-child", depends_on=["dep-w-parent"])
    r = await api.http.post("/v1/jobs/dep-w-child/cancel")
    assert r.status_code == 200, r.text
    assert await state(api, "dep-w-child") == "cancelled"
    (p,) = await fetch(api)
    await ack(api, p)
    assert await state(api, "dep-w-child") == "cancelled"
    r = await api.http.delete("/v1/jobs/dep-w-child")
    assert r.status_code in (200, 204)
    assert await count(database_url, "SELECT count(*) FROM werk_job_deps") == 0


async def test_a_dependency_dead_before_the_push_applies_the_policy_at_once(api):
    await push(api, jid="dep-dead-1", retry=-1)
    (p,) = await fetch(api)
    await fail(api, p)
    answer = await batch(
        api,
        [
            {"jobtype": "t", "ref": "c", "depends_on": ["dep-dead-1"]},
            {"jobtype": "t", "ref": "g", "depends_on": ["c"]},
            {"jobtype": "t", "ref": "i", "depends_on": [
                {"job": "dep-dead-1", "on_failure": "ignore"}]},
        ],
    )  # fmt: skip
    states = {j["jid"]: j["state"] for j in answer["jobs"]}
    refs = answer["refs"]
    assert [states[refs[r]] for r in "cgi"] == ["dead", "dead", "available"]


async def test_a_fan_in_of_10000_children_releases_the_dependent_once(api, database_url):
    n = 10_000
    jids = []
    for start in range(0, n, 1000):
        answer = await batch(api, [{"jobtype": "t"} for _ in range(start, start + 1000)])
        jids += answer["jids"]
    await push(api, jid="dep-fan-in", depends_on=jids)
    ran = await run_all_batched(api)
    assert ran.count("dep-fan-in") == 1 and ran[-1] == "dep-fan-in"
    assert len(ran) == n + 1 and len(set(ran)) == n + 1
    assert (
        await count(database_url, "SELECT count(*) FROM werk_jobs WHERE state <> 'completed'") == 0
    )


async def test_two_servers_acking_the_last_dependencies_at_once_release_each_dependent_once(
    werk_server_factory, database_url
):
    servers = [werk_server_factory(), werk_server_factory()]
    rounds = 60
    async with httpx.AsyncClient(timeout=30) as http:
        for i in range(rounds):
            items = [
                {"jobtype": "t", "ref": "a", "queue": "parents"},
                {"jobtype": "t", "ref": "b", "queue": "parents"},
                {"jobtype": "t", "ref": "d", "queue": "children", "depends_on": ["a", "b"]},
            ]
            r = await http.post(servers[i % 2].url + "/v1/jobs/batch", json={"jobs": items})
            assert r.status_code == 201, r.text
        r = await http.post(
            servers[0].url + "/v1/fetch",
            json={"queues": ["parents"], "wid": "w1", "count": 100},
        )
        parents = r.json()["jobs"]
        r = await http.post(
            servers[0].url + "/v1/fetch",
            json={"queues": ["parents"], "wid": "w1", "count": 100},
        )
        parents += r.json()["jobs"]
        assert len(parents) == 2 * rounds
        # Each child's two parents are acked at once, one on each server.
        acks = [
            http.post(
                servers[k % 2].url + f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]}
            )
            for k, job in enumerate(sorted(parents, key=lambda j: j["created_at"] + j["jid"]))
        ]
        answers = await asyncio.gather(*acks)
        assert [a.text for a in answers if a.status_code != 204] == []
        children = []
        while True:
            r = await http.post(
                servers[1].url + "/v1/fetch",
                json={"queues": ["children"], "wid": "w2", "count": 100},
            )
            if not (got := r.json()["jobs"]):
                break
            children += got
    left = await sql(
        database_url,
        "SELECT jid, state, waiting_for, run_at FROM werk_jobs"
        " WHERE queue = 'children' AND state <> 'active'",
    )
    assert left == []
    assert len(children) == rounds and len({c["jid"] for c in children}) == rounds
    assert all(c["attempt"] == 1 for c in children)
    assert await waiting_count(database_url) == 0


async def test_a_waiting_job_past_expires_at_expires_and_its_dependents_follow_their_policy(
    api, database_url
):
    parent = await push(api, jid="dep-exp-parent")
    await push(api, jid="dep-exp-mid", depends_on=[parent["jid"]], expires_in=10)
    for jid, policy in (("dep-exp-f", "fail"), ("dep-exp-s", "skip"), ("dep-exp-i", "ignore")):
        await push(api, jid=jid, depends_on=[{"job": "dep-exp-mid", "on_failure": policy}])
    api.clock.advance(5)
    assert (await api.maintain())["expired"] == 0
    assert await state(api, "dep-exp-mid") == "waiting"
    api.clock.advance(10)
    assert (await api.maintain())["expired"] == 1
    assert await state(api, "dep-exp-mid") == "expired"
    assert [await state(api, j) for j in ("dep-exp-f", "dep-exp-s", "dep-exp-i")] == [
        "dead", "skipped", "available"
    ]  # fmt: skip
    r = await api.http.get("/v1/jobs/dep-exp-f")
    assert r.json()["failure"]["message"] == "dependency dep-exp-mid expired", r.text
    # The parent settling later changes nothing of the expired job.
    assert [j["jid"] for j in await fetch(api)] == ["dep-exp-parent", "dep-exp-i"]


async def test_a_dependency_acked_while_a_push_names_it_is_found_kept(
    werk_server_factory, database_url
):
    """One server acks a kept job while the other pushes a job depending on it: the push finds
    the dependency, in whichever table the ack left it, and is never refused for it."""
    servers = [werk_server_factory(), werk_server_factory()]
    rounds = 400
    async with httpx.AsyncClient(timeout=30) as http:
        roots = [{"jobtype": "t", "queue": "roots", "keep_result_for": 600} for _ in range(rounds)]
        r = await http.post(servers[0].url + "/v1/jobs/batch", json={"jobs": roots})
        assert r.status_code == 201, r.text
        fetched = []
        while len(fetched) < rounds:
            r = await http.post(
                servers[0].url + "/v1/fetch",
                json={"queues": ["roots"], "wid": "w1", "count": 100},
            )
            fetched += r.json()["jobs"]

        async def race(job):
            return await asyncio.gather(
                http.post(
                    servers[0].url + f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]}
                ),
                http.post(
                    servers[1].url + "/v1/jobs",
                    json={"jobtype": "c", "queue": "children", "depends_on": [job["jid"]]},
                ),
            )

        answers = [a for pair in await asyncio.gather(*(race(j) for j in fetched)) for a in pair]
    assert [a.text for a in answers if a.status_code not in (201, 204)] == []
    assert await count(database_url, "SELECT count(*) FROM werk_jobs WHERE queue = 'children'") == (
        rounds
    )


async def test_a_unique_job_beside_dependent_ones_is_refused_at_its_own_item(api, database_url):
    items = [
        {"jobtype": "u", "unique": {"key": "beside"}},
        {"jobtype": "x", "ref": "x"},
        {"jobtype": "y", "depends_on": ["x"], "unique": {}},
    ]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": items})
    assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    assert [e["loc"] for e in r.json()["errors"]] == ["jobs.0.unique", "jobs.2.unique"]
    assert await count(database_url, "SELECT count(*) FROM werk_jobs") == 0
