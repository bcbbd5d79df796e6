"""The admin API through the Python SDK against a real server: jobs listed page by page and
acted on one at a time and in bulk, queues paused and cleared, workers listed and signalled,
the history and the batch list. The contract (client/contract/scenarios/admin.json) checks
each answer's shape through every SDK; this checks what a scenario on a shared server cannot."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from werk_client import AsyncClient, Client, JobNotFound, JobSpec, WerkError


def test_jobs_are_listed_page_by_page_and_acted_on_in_bulk(werk_server):
    with Client(werk_server.url) as client:
        client.push_many(JobSpec("t", [i], queue="adm") for i in range(5))
        seen, cursor, pages = [], None, 0
        while True:
            page = client.list_jobs(queue="adm", order="oldest", limit=2, cursor=cursor)
            seen += [j.args[0] for j in page.jobs]
            pages += 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert (seen, pages) == ([0, 1, 2, 3, 4], 3)
        assert [j.args for j in client.list_jobs(queue="adm", q="3").jobs] == [[3]]
        cancelled = client.cancel_jobs(queue="adm", limit=3)
        assert (cancelled.action, cancelled.changed, cancelled.more) == ("cancel", 3, True)
        assert client.delete_jobs(state="cancelled").changed == 3
        assert client.clear_queue("adm") == 2
        assert client.list_jobs(queue="adm").jobs == []
        with pytest.raises(TypeError, match="stat"):
            client.retry_jobs(stat="dead")
        with pytest.raises(JobNotFound):
            client.kill_job("no-such-job")


def test_a_job_is_acted_on_where_its_state_allows(werk_server):
    with Client(werk_server.url) as client:
        job = client.push("t", queue="adm")
        assert client.kill_job(job.jid).state == "dead"
        with pytest.raises(WerkError) as refused:
            client.cancel_job(job.jid)
        assert (refused.value.status, refused.value.code) == (409, "job_state_conflict")
        assert client.retry_job(job.jid).state == "available"
        paused = client.pause_queue("adm")
        assert paused.paused and paused.counts == {"available": 1}
        assert client.fetch(["adm"], wid="w", wait=0) == []
        assert not client.resume_queue("adm").paused
        assert [q.name for q in client.list_queues()] == ["adm"]
        client.delete_job(job.jid)
        with pytest.raises(JobNotFound):
            client.delete_job(job.jid)
        [today] = client.history(days=1, queue="adm")
        assert (today.day, today.pushed) == (datetime.now(UTC).date(), 1)


async def test_workers_are_listed_and_signalled(werk_server):
    async with AsyncClient(werk_server.url) as client:
        for wid in ("w-1", "w-2"):
            assert await client.beat(wid, hostname="h", labels=["adm"]) == "running"
        assert await client.quiet_workers() == 2
        assert await client.terminate_worker("w-1") == "terminate"
        assert await client.terminate_workers() == 1  # w-2; w-1 is asked already
        workers = await client.list_workers()
        assert {(w.wid, w.state, w.labels[0]) for w in workers} == {
            ("w-1", "terminate", "adm"),
            ("w-2", "terminate", "adm"),
        }
        assert await client.beat("w-1", hostname="h") == "terminate"
        assert (await client.list_workers(include_gone=True))[0].gone_at is None
        with pytest.raises(WerkError) as missing:
            await client.quiet_worker("nobody")
        assert missing.value.code == "worker_not_found"


async def test_batches_are_listed_page_by_page(werk_server):
    async with AsyncClient(werk_server.url) as client:
        bids = [(await client.create_batch(description=f"b{i}")).bid for i in range(3)]
        await client.commit_batch(bids[0])
        first = await client.list_batches(limit=2)
        second = await client.list_batches(limit=2, cursor=first.next)
        assert [b.bid for b in first.batches + second.batches] == bids[::-1]
        assert second.next is None
        unfinished = await client.list_batches(unfinished=True)
        assert {b.bid for b in unfinished.batches} == set(bids[1:])
