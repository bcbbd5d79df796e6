"""A worker whose connection is reset (RST) while its FETCH blocks, against `werk serve` as it
runs (uvloop, whose transports refuse a write once closed): the job handed to that FETCH goes
back to its queue, and the server logs no failure."""

from __future__ import annotations

import asyncio

import httpx

from tests.integration.faktory.fwp import Fwp
from tests.support.server import free_port


async def test_a_reset_during_fetch_hands_the_job_back_quietly(werk_server_factory):
    port = free_port()
    server = werk_server_factory(
        env={"WERK_FAKTORY_PORT": str(port), "WERK_FAKTORY_FETCH_WAIT": "2"}
    )
    worker = await Fwp.connect(port, wid="reset-e2e")
    await worker.send_raw(b"FETCH resetq\r\n")
    await asyncio.sleep(0.3)  # the FETCH is waiting
    worker.reset()
    await asyncio.sleep(0.1)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        job = {"jid": "reset-e2e-1", "jobtype": "t", "queue": "resetq"}
        assert (await http.post("/v1/jobs", json=job)).status_code == 201
        state = "active"
        for _ in range(100):  # until the reset FETCH has ended
            state = (await http.get("/v1/jobs/reset-e2e-1")).json()["state"]
            if state != "active":
                break
            await asyncio.sleep(0.05)
        assert state == "available"
    log = server.log_path.read_text()
    assert "FWP connection failed" not in log and "Traceback" not in log, log[-3000:]
