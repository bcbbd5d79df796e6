"""A result poll on one node is answered when another node acks the job, through the
notification channel: within milliseconds, not at the next re-check."""

from __future__ import annotations

import asyncio
import time

import httpx


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
