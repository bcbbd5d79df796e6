"""Job dependencies through the Python SDK against a real server: a Flow pushed in one request
(refs answered), ``push(depends_on=)``, a worker whose handlers read their dependencies'
results from ``job.dependencies``, and a refused cycle."""

from __future__ import annotations

import asyncio

import pytest

from werk_client import (
    AsyncClient,
    Client,
    Flow,
    JobSpec,
    Needs,
    Registry,
    ValidationError,
    Worker,
)


def test_client_pushes_a_flow_and_a_dependent(werk_server):
    flow = Flow()
    a = flow.add("extract", [1], ref="a")
    b = flow.add("transform", depends_on=[a], ref="b")
    flow.add("load", depends_on=[b], on_dependency_failure="skip", ref="c")
    with Client(werk_server.url) as client:
        pushed = client.push_flow(flow)
        assert pushed.refs == flow.refs() and pushed.created == 3
        assert [j.state for j in pushed.jobs] == ["available", "waiting", "waiting"]
        after = client.push("notify", depends_on=[a.jid], on_dependency_failure="ignore")
        assert after.state == "waiting"
        stored = client.get(a.jid)
        assert {d.jid for d in stored.dependents or []} == {b.jid, after.jid}
        (job,) = client.fetch(["default"], wid="w")
        assert job.jid == a.jid
        client.ack(job.jid, job.lease, result={"rows": 3})
        jobs = client.fetch(["default"], wid="w", count=10)
        assert {j.jid for j in jobs} == {b.jid, after.jid}
        for j in jobs:
            (dep,) = j.dependencies or []
            assert dep.jid == a.jid and dep.completed and dep.result == {"rows": 3}


def test_one_dependency_takes_a_policy_of_its_own(werk_server):
    flow = Flow()
    a = flow.add("extract", ref="a", retry=0)
    b = flow.add("extract", ref="b")
    both = flow.add("merge", depends_on=[Needs(a, on_failure="ignore"), Needs("b")])
    with Client(werk_server.url) as client:
        client.push_flow(flow)
        for job in client.fetch(["default"], wid="w", count=2):
            if job.jid == a.jid:
                client.fail(job.jid, job.lease, errtype="E", message="gone")
            else:
                client.ack(job.jid, job.lease)
        # a ended badly; its policy is "ignore", so merge runs (its own default is "fail").
        (job,) = client.fetch(["default"], wid="w")
        assert job.jid == both.jid
        assert {d.jid: d.completed for d in job.dependencies or []} == {a.jid: False, b.jid: True}
        after = client.push("notify", depends_on=[Needs(both.jid, on_failure="skip")])
        assert after.state == "waiting"


def test_a_cycle_is_refused(werk_server):
    a = JobSpec("x", jid="cycle-a-0001", depends_on=["cycle-b-0001"])
    b = JobSpec("x", jid="cycle-b-0001", depends_on=[a])
    with Client(werk_server.url) as client, pytest.raises(ValidationError) as caught:
        client.push_many([a, b])
    assert caught.value.code == "dependency_cycle"


async def test_a_worker_hands_each_job_its_dependencies_results(werk_server):
    registry = Registry()

    @registry.handler("square")
    def square(x):
        return x * x

    @registry.handler("total", with_job=True)
    def total(job):
        return sum(job.dependencies.results().values())

    flow = Flow()
    parts = [flow.add("square", [i], ref=f"sq{i}") for i in range(1, 5)]
    summed = flow.add("total", depends_on=parts, keep_result_for=60)
    worker = Worker(registry, url=werk_server.url, concurrency=4, fetch_wait=1)
    async with AsyncClient(werk_server.url) as client:
        await client.push_flow(flow)
        running = asyncio.create_task(worker.run_async())
        try:
            got = await client.result(summed.jid, wait=20)
        finally:
            worker.stop()
            await running
    assert got.done and got.result == 1 + 4 + 9 + 16


async def parts_then_whole(url, check_read):
    """Twelve parts acked with results, and a whole depending on them all, run by a worker each:
    ``check_read(client, whole, expected)`` looks at the whole in between. Answers what the
    whole's handler saw of its dependencies, and what it should see: every one, with its result,
    none marked left out."""
    registry = Registry()
    seen = []

    @registry.handler("part")
    async def part(i):
        return {"part": i, "pad": "x" * 10}

    @registry.handler("whole", with_job=True)
    async def whole(job):
        seen.append([(d.jid, d.result, d.result_omitted) for d in job.dependencies.values()])

    flow = Flow()
    parts = [flow.add("part", [i], ref=f"p{i:02}", queue="parts") for i in range(12)]
    summed = flow.add("whole", depends_on=parts, keep_result_for=60)
    expected = [(p.jid, {"part": i, "pad": "x" * 10}, False) for i, p in enumerate(parts)]
    async with AsyncClient(url) as client:
        await client.push_flow(flow)
        worker = Worker(registry, url=url, queues=["parts"], concurrency=12, fetch_wait=1)
        running = asyncio.create_task(worker.run_async())
        try:
            for p in parts:
                assert (await client.result(p.jid, wait=20)).done
        finally:
            worker.stop()
            await running
        await check_read(client, summed, expected)
        worker = Worker(registry, url=url, concurrency=1, fetch_wait=1)
        running = asyncio.create_task(worker.run_async())
        try:
            assert (await client.result(summed.jid, wait=20)).done
        finally:
            worker.stop()
            await running
    (got,) = seen
    return sorted(got), sorted(expected)


async def test_results_the_answer_left_out_are_read_before_the_handler_runs(
    werk_server_factory,
):
    # A budget of about three results per answer: the fetch leaves most of them out.
    server = werk_server_factory({"WERK_MAX_DEPENDENCY_RESULTS_BYTES": "100"})

    async def check_read(client, summed, expected):
        read = await client.get(summed.jid)
        omitted = [d.result_omitted for d in read.dependencies or []]
        assert omitted.count(True) >= 8 and omitted == sorted(omitted)  # the first ones carried
        every = await client.dependencies(summed.jid)
        assert sorted((d.jid, d.result, d.result_omitted) for d in every) == sorted(expected)
        assert [d.jid for d in await client.dependencies(summed.jid, after=every[5].jid)] == [
            d.jid for d in every[6:]
        ]

    got, expected = await parts_then_whole(server.url, check_read)
    assert got == expected


async def test_dependencies_the_answer_did_not_list_are_read_before_the_handler_runs(
    werk_server_factory,
):
    # An answer lists four dependencies, with their results: the fetch leaves out the rest.
    server = werk_server_factory({"WERK_MAX_DEPENDENCIES_LISTED": "4"})

    async def check_read(client, summed, expected):
        read = await client.get(summed.jid)
        assert read.dependencies_omitted
        assert [d.jid for d in read.dependencies or []] == sorted(e[0] for e in expected)[:4]

    got, expected = await parts_then_whole(server.url, check_read)
    assert got == expected
