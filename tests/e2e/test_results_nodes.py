"""A result poll on one node is answered when another node acks the job, through the
notification channel: within milliseconds, not at the next re-check."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.integration.faktory.fwp import Fwp
from tests.support.server import free_port


async def test_a_result_poll_on_one_node_is_woken_by_an_ack_on_another(werk_server_factory):
    # Re-checks every 30 s: only the notification can answer the poll in time.
    a = werk_server_factory(env={"WERK_POLL_INTERVAL": "30"})
    b = werk_server_factory(env={"WERK_POLL_INTERVAL": "30"})
    async with httpx.AsyncClient(timeout=30) as http:
        await asyncio.sleep(1)  # B's announcement reaches A
        delays = []
        for i in range(5):
            jid = f"nodes-result-{i}"
            r = await http.post(
                a.url + "/v1/jobs", json={"jobtype": "t", "jid": jid, "keep_result_for": 60}
            )
            assert r.status_code == 201, r.text
            r = await http.post(a.url + "/v1/fetch", json={"queues": ["default"], "wid": "w"})
            (job,) = r.json()["jobs"]
            waiting = asyncio.create_task(http.get(f"{b.url}/v1/jobs/{jid}/result?wait=20"))
            await asyncio.sleep(0.3)  # the poll is waiting on B
            assert not waiting.done()
            r = await http.post(
                f"{a.url}/v1/jobs/{jid}/ack", json={"lease": job["lease"], "result": {"i": i}}
            )
            assert r.status_code == 204, r.text
            acked = time.monotonic()
            answer = await waiting
            delays.append(time.monotonic() - acked)
            assert answer.status_code == 200, answer.text
            assert answer.json()["done"] is True and answer.json()["result"] == {"i": i}
        assert max(delays) < 0.25, delays


async def test_every_settlement_on_one_node_wakes_result_polls_on_another(werk_server_factory):
    """Orphaned to dead, killed, cancelled, deleted, expired, failed to dead: each on node A
    answers a poll waiting on node B at once. B runs no maintenance pass after its first and
    re-checks every 60 s, so only A's notifications can answer in time."""
    a = werk_server_factory(
        env={
            "WERK_POLL_INTERVAL": "60",
            "WERK_MAINTENANCE_INTERVAL": "0.1",
            "WERK_WORKER_TIMEOUT": "1",
            "WERK_MAX_ORPHANS": "1",
        }
    )
    b = werk_server_factory(env={"WERK_POLL_INTERVAL": "60", "WERK_MAINTENANCE_INTERVAL": "3600"})
    async with httpx.AsyncClient(timeout=30) as http:
        await asyncio.sleep(1)  # B's announcement reaches A

        async def push(jid: str, **job: object) -> None:
            body = {"jobtype": "t", "jid": jid, "queue": jid, "keep_result_for": 60, **job}
            r = await http.post(a.url + "/v1/jobs", json=body)
            assert r.status_code == 201, r.text

        async def take(jid: str, wid: str = "w") -> dict[str, object]:
            r = await http.post(a.url + "/v1/fetch", json={"queues": [jid], "wid": wid})
            (job,) = r.json()["jobs"]
            return dict(job)

        async def waiting_on_b(jid: str) -> asyncio.Task[httpx.Response]:
            task = asyncio.create_task(http.get(f"{b.url}/v1/jobs/{jid}/result?wait=30"))
            await asyncio.sleep(0.3)  # the poll is waiting on B
            assert not task.done()
            return task

        async def answered_soon(
            task: asyncio.Task[httpx.Response], within: float
        ) -> httpx.Response:
            started = time.monotonic()
            answer = await asyncio.wait_for(task, within)
            assert time.monotonic() - started < within
            return answer

        # Admin actions: answered within a quarter second.
        for action in ("kill", "cancel"):
            jid = f"nodes-{action}"
            await push(jid)
            poll = await waiting_on_b(jid)
            r = await http.post(f"{a.url}/v1/jobs/{jid}/{action}")
            assert r.status_code == 200, r.text
            answer = await answered_soon(poll, 0.25)
            state = "dead" if action == "kill" else "cancelled"
            assert answer.status_code == 200 and answer.json()["state"] == state, answer.text
        await push("nodes-delete")
        poll = await waiting_on_b("nodes-delete")
        assert (await http.delete(f"{a.url}/v1/jobs/nodes-delete")).status_code == 204
        assert (await answered_soon(poll, 0.25)).status_code == 404
        await push("nodes-fail")
        job = await take("nodes-fail")
        poll = await waiting_on_b("nodes-fail")
        r = await http.post(
            f"{a.url}/v1/jobs/nodes-fail/fail",
            json={"lease": job["lease"], "message": "no", "retry": False},
        )
        assert r.status_code == 200, r.text
        assert (await answered_soon(poll, 0.25)).json()["state"] == "dead"

        # Upkeep on A: due within a second or two, far before B's re-check.
        await push("nodes-expire", expires_in=1)
        poll = await waiting_on_b("nodes-expire")
        answer = await answered_soon(poll, 5)
        assert answer.json()["state"] == "expired", answer.text
        r = await http.post(a.url + "/v1/beat", json={"wid": "w-lost"})
        assert r.status_code == 200, r.text
        await push("nodes-orphan")
        await take("nodes-orphan", wid="w-lost")
        poll = await waiting_on_b("nodes-orphan")  # w-lost beats no more: lost after 1 s
        answer = await answered_soon(poll, 5)
        assert answer.json()["state"] == "dead", answer.text
        assert answer.json()["failure"]["errtype"] == "WorkerLost", answer.text


async def test_a_flush_on_one_node_answers_result_polls_on_another(werk_server_factory):
    """FWP FLUSH deletes every job without naming them: node A tells node B to look again, and
    B's polls answer 404 at once (B re-checks every 60 s)."""
    port = free_port()
    a = werk_server_factory(env={"WERK_POLL_INTERVAL": "60", "WERK_FAKTORY_PORT": str(port)})
    b = werk_server_factory(env={"WERK_POLL_INTERVAL": "60"})
    async with httpx.AsyncClient(timeout=30) as http:
        await asyncio.sleep(1)  # B's announcement reaches A
        jids = ("nodes-flush-1", "nodes-flush-2")
        for jid in jids:
            body = {"jobtype": "t", "jid": jid, "keep_result_for": 60}
            r = await http.post(a.url + "/v1/jobs", json=body)
            assert r.status_code == 201, r.text
        polls = [
            asyncio.create_task(http.get(f"{b.url}/v1/jobs/{jid}/result?wait=30")) for jid in jids
        ]
        await asyncio.sleep(0.3)  # the polls are waiting on B
        assert not any(p.done() for p in polls)
        conn = await Fwp.connect(port, wid="w-flush")
        try:
            assert str(await conn.call("FLUSH")) == "+OK"
            flushed = time.monotonic()
            answers = await asyncio.wait_for(asyncio.gather(*polls), 10)
        finally:
            await conn.close()
        assert time.monotonic() - flushed < 0.25
        assert [x.status_code for x in answers] == [404, 404], [x.text for x in answers]


async def test_a_result_poll_on_a_job_finished_by_its_dependency_is_woken_at_once(
    werk_server_factory,
):
    """A dependent failed or skipped because its dependency died on node A answers a poll
    waiting on node B at once, by the notification its settling sends, not at the re-check."""
    a = werk_server_factory(env={"WERK_POLL_INTERVAL": "30"})
    b = werk_server_factory(env={"WERK_POLL_INTERVAL": "30"})
    async with httpx.AsyncClient(timeout=30) as http:
        await asyncio.sleep(1)  # B's announcement reaches A
        delays = []
        for i, policy in enumerate(("fail", "skip", "fail")):
            parent, child = f"prop-parent-{i}", f"prop-child-{i}"
            r = await http.post(a.url + "/v1/jobs", json={"jobtype": "t", "jid": parent})
            assert r.status_code == 201, r.text
            r = await http.post(
                a.url + "/v1/jobs",
                json={"jobtype": "t", "jid": child, "keep_result_for": 60,
                      "depends_on": [{"job": parent, "on_failure": policy}]},
            )  # fmt: skip
            assert r.status_code == 201, r.text
            r = await http.post(a.url + "/v1/fetch", json={"queues": ["default"], "wid": "w"})
            (job,) = r.json()["jobs"]
            assert job["jid"] == parent
            waiting = asyncio.create_task(http.get(f"{b.url}/v1/jobs/{child}/result?wait=20"))
            await asyncio.sleep(0.3)  # the poll is waiting on B
            assert not waiting.done()
            r = await http.post(
                f"{a.url}/v1/jobs/{parent}/fail",
                json={"lease": job["lease"], "errtype": "E", "message": "m", "retry": False},
            )
            assert r.status_code == 200, r.text
            failed = time.monotonic()
            answer = await waiting
            delays.append(time.monotonic() - failed)
            assert answer.status_code == 200, answer.text
            assert answer.json()["done"] is True, answer.text
            assert answer.json()["state"] == ("skipped" if policy == "skip" else "dead")
        assert max(delays) < 0.25, delays
