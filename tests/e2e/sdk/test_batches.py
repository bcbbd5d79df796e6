"""Batches through the Python SDK against a real server: ``with client.batch(...)`` commits on
exit and its callbacks run once; a worker's handler adds work to its own batch from inside;
the async client; typed errors."""

from __future__ import annotations

import asyncio

import pytest

from werk_client import (
    AsyncClient,
    BatchClosed,
    BatchNotFound,
    Client,
    JobSpec,
    Registry,
    Worker,
)


def test_a_batch_commits_on_exit_and_finishes(werk_server):
    with Client(werk_server.url) as client:
        with client.batch(description="sdk", on_success=JobSpec("done", queue="sdk-cb")) as b:
            first = b.push("t", [1], queue="sdk-b")
            b.push_many([JobSpec("t", [2], queue="sdk-b"), {"jobtype": "t", "queue": "sdk-b"}])
            assert b.status().state == "open"
        assert first.batch == b.bid
        status = client.batch_status(b.bid)
        assert (status.state, status.total, status.pending) == ("committed", 3, 3)
        assert status.on_success is not None and status.on_success.state == "waiting"
        with pytest.raises(BatchClosed) as caught:
            client.push("t", queue="sdk-b", batch=b.bid)
        assert caught.value.code == "batch_committed"
        for job in client.fetch(["sdk-b"], wid="w", count=10):
            client.ack(job.jid, job.lease)
        status = client.batch_status(b.bid)
        assert status.state == "finished" and status.succeeded == 3
        (cb,) = client.fetch(["sdk-cb"], wid="w", count=10)
        assert cb.jobtype == "done" and cb.jid == status.on_success.jid
        with pytest.raises(BatchNotFound):
            client.batch_status("b-nosuchbatch-sdk")


def test_a_block_that_raises_leaves_the_batch_open(werk_server):
    with Client(werk_server.url) as client:
        with pytest.raises(RuntimeError), client.batch() as b:
            b.push("t", queue="sdk-raise")
            raise RuntimeError("stop")
        assert client.batch_status(b.bid).state == "open"


async def test_a_handler_adds_work_to_its_batch_from_inside(werk_server):
    registry = Registry()
    ran: list[str] = []

    @registry.handler("split", with_job=True)
    async def split(job):
        ran.append("split")
        async with AsyncClient(werk_server.url) as client, client.open_batch(job.batch) as b:
            for i in range(3):
                await b.push("part", [i], queue="sdk-in")

    @registry.handler("part")
    def part(i):
        ran.append(f"part{i}")

    @registry.handler("all-done")
    def all_done():
        ran.append("all-done")

    async with AsyncClient(werk_server.url) as client:
        async with client.batch(on_success=JobSpec("all-done", queue="sdk-in")) as b:
            await b.push("split", queue="sdk-in")
        worker = Worker(registry, url=werk_server.url, queues=["sdk-in"], fetch_wait=1)
        running = asyncio.create_task(worker.run_async())
        try:
            for _ in range(100):
                if "all-done" in ran:
                    break
                await asyncio.sleep(0.1)
        finally:
            worker.stop()
            await running
        status = await client.batch_status(b.bid)
    assert sorted(ran) == ["all-done", "part0", "part1", "part2", "split"]
    assert (status.total, status.succeeded, status.state) == (4, 4, "finished")


def test_a_child_batch_is_a_member_of_its_parent(werk_server):
    with Client(werk_server.url) as client:
        done = {"jobtype": "p-done", "queue": "sdk-nest-cb"}
        with client.batch(on_complete=done) as parent, parent.batch(description="c") as child:
            child.push("t", queue="sdk-nest")
        status = client.batch_status(parent.bid)
        assert status.children == [child.bid] and status.total == 1
        assert client.batch_status(child.bid).parent == parent.bid
        (job,) = client.fetch(["sdk-nest"], wid="w")
        assert job.batch == child.bid
        client.ack(job.jid, job.lease)
        assert client.batch_status(parent.bid).state == "finished"
        (cb,) = client.fetch(["sdk-nest-cb"], wid="w")
        assert cb.jobtype == "p-done"
