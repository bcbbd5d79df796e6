"""Job results through the Python SDK against a real server: push with keep_result_for, ack with
a result, ``result(jid, wait=)`` on Client and AsyncClient, and a handler's return value sent as
its result by the worker (in-loop, threaded and in a child process; batched and not)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.e2e.sdk.jobs_app import answer
from werk_client import AsyncClient, Client, JobNotFound, JobResult, Registry, Worker


def test_client_round_trip(werk_server):
    with Client(werk_server.url) as client:
        pushed = client.push("report", [1], keep_result_for=60)
        assert pushed.keep_result_for == 60 and pushed.result is None
        (job,) = client.fetch(["default"], wid="w")
        pending = client.result(pushed.jid)
        assert isinstance(pending, JobResult) and not pending.done and pending.state == "active"
        client.ack(job.jid, job.lease, result={"rows": [1, 2]})
        got = client.result(pushed.jid, wait=5)
        assert got.done and got.completed and got.result == {"rows": [1, 2]}
        assert got.completed_at is not None and got.failure is None
        stored = client.get(pushed.jid)
        assert stored.state == "completed" and stored.result == {"rows": [1, 2]}
        assert stored.completed_at == got.completed_at
        gone = client.push("report", [2])
        (job,) = client.fetch(["default"], wid="w")
        client.ack_many([(job.jid, job.lease, "dropped")])
        with pytest.raises(JobNotFound):
            client.result(gone.jid)


async def test_async_client_waits_for_the_result(werk_server):
    async with AsyncClient(werk_server.url) as client:
        pushed = await client.push("report", keep_result_for=60)
        (job,) = await client.fetch(["default"], wid="w")
        waiting = asyncio.create_task(client.result(pushed.jid, wait=20))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        result = await client.ack_many([(job.jid, job.lease, [1, "two"])])
        assert result.acked == [job.jid]
        got = await waiting
        assert time.monotonic() - started < 0.5
        assert got.done and got.result == [1, "two"]


@pytest.mark.parametrize("options", [{}, {"batch_ack": False}, {"process": True}])
async def test_a_handlers_return_value_is_sent_as_its_result(werk_server, options):
    registry = Registry()

    @registry.handler("async_answer")
    async def async_answer(x):
        return {"async": x}

    @registry.handler("sync_answer")
    def sync_answer(x):
        return [x, x]

    @registry.handler("opaque")
    def opaque(x):
        return object()  # not JSON: acked without a result

    @registry.handler("nothing")
    def nothing(x):
        return None

    registry.handler("answer")(answer)
    jobtypes = ["answer"] if options.get("process") else list(registry.jobtypes)
    worker = Worker(registry, url=werk_server.url, concurrency=4, fetch_wait=1, **options)
    async with AsyncClient(werk_server.url) as client:
        jids = {t: (await client.push(t, [7], keep_result_for=60)).jid for t in jobtypes}
        running = asyncio.create_task(worker.run_async())
        try:
            results = {t: await client.result(jid, wait=20) for t, jid in jids.items()}
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
    assert {t: (r.state, r.result) for t, r in results.items()} == {
        t: ("completed", expected)
        for t, expected in {
            "async_answer": {"async": 7},
            "sync_answer": [7, 7],
            "opaque": None,
            "nothing": None,
            "answer": {"answer": 14},
        }.items()
        if t in jobtypes
    }


async def test_a_result_too_large_is_logged_and_the_job_acked_without_it(werk_server_factory):
    server = werk_server_factory(env={"WERK_MAX_RESULT_BYTES": "50"})
    registry = Registry()

    @registry.handler("big")
    def big(n):
        return "x" * n

    worker = Worker(registry, url=server.url, concurrency=4, fetch_wait=1)
    async with AsyncClient(server.url) as client:
        jids = [(await client.push("big", [n], keep_result_for=60)).jid for n in (10, 100, 20)]
        running = asyncio.create_task(worker.run_async())
        try:
            results = [await client.result(jid, wait=20) for jid in jids]
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
    assert [(r.state, r.result) for r in results] == [
        ("completed", "x" * 10),
        ("completed", None),
        ("completed", "x" * 20),
    ]
