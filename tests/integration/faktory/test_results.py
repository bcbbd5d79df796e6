"""Job results over Faktory's protocol: custom.keep_result_for keeps a job, ACK may carry its
result, an ACK without one (what Faktory's clients send) acks as always, and FLUSH answers the
result polls waiting on the jobs it deletes."""

from __future__ import annotations

import asyncio
import time

from tests.integration.faktory.fwp import Fwp


async def test_an_ack_carries_the_result_of_a_job_kept_by_custom_keep_result_for(fwp):
    conn = await Fwp.connect(fwp.port, wid="w-results")
    try:
        job = {"jid": "fwp-result-1", "jobtype": "t", "args": [], "custom": {"keep_result_for": 60}}
        assert str(await conn.cmd("PUSH", job)) == "+OK"
        reply = await conn.call("FETCH default")
        assert reply.json["jid"] == "fwp-result-1"
        assert str(await conn.cmd("ACK", {"jid": "fwp-result-1", "result": {"rows": 7}})) == "+OK"
    finally:
        await conn.close()
    got = (await fwp.http.get("/v1/jobs/fwp-result-1/result")).json()
    assert got["done"] is True and got["state"] == "completed" and got["result"] == {"rows": 7}
    assert (await fwp.http.get("/v1/jobs/fwp-result-1")).json()["keep_result_for"] == 60


async def test_an_ack_without_a_result_and_a_job_without_keep_result_for(fwp):
    conn = await Fwp.connect(fwp.port, wid="w-results-2")
    try:
        for jid in ("fwp-result-2", "fwp-result-3"):
            extra = {"keep_result_for": 30} if jid == "fwp-result-2" else {}
            job = {"jid": jid, "jobtype": "t", "args": [], **extra}
            assert str(await conn.cmd("PUSH", job)) == "+OK"
            assert (await conn.call("FETCH default")).json["jid"] == jid
            assert str(await conn.cmd("ACK", {"jid": jid, "result": "r"})) == "+OK"
    finally:
        await conn.close()
    kept = (await fwp.http.get("/v1/jobs/fwp-result-2/result")).json()
    assert kept["state"] == "completed" and kept["result"] == "r"
    assert (await fwp.http.get("/v1/jobs/fwp-result-3")).status_code == 404


async def test_an_oversized_or_unstorable_result_is_refused_and_the_job_stays_active(make_fwp):
    fwp = await make_fwp(max_result_bytes=10)
    conn = await Fwp.connect(fwp.port, wid="w-results-3")
    try:
        job = {"jid": "fwp-result-4", "jobtype": "t", "args": [], "keep_result_for": 60}
        assert str(await conn.cmd("PUSH", job)) == "+OK"
        assert (await conn.call("FETCH default")).json["jid"] == "fwp-result-4"
        big = await conn.cmd("ACK", {"jid": "fwp-result-4", "result": "x" * 20})
        assert big.kind == "-" and "WERK_MAX_RESULT_BYTES" in (big.text or ""), big
        bad = await conn.cmd("ACK", {"jid": "fwp-result-4", "result": {"a": "\u0000"}})
        assert bad.kind == "-" and "result" in (bad.text or ""), bad
        assert (await fwp.http.get("/v1/jobs/fwp-result-4")).json()["state"] == "active"
        assert str(await conn.cmd("ACK", {"jid": "fwp-result-4", "result": 5})) == "+OK"
    finally:
        await conn.close()
    assert (await fwp.http.get("/v1/jobs/fwp-result-4/result")).json()["result"] == 5


async def test_a_flush_answers_the_result_polls_waiting_on_its_jobs_at_once(make_fwp):
    # Re-checks every 30 s: only the flush itself can answer the polls in time.
    fwp = await make_fwp(poll_interval=30)
    for jid in ("fwp-flush-1", "fwp-flush-2"):
        r = await fwp.http.post(
            "/v1/jobs", json={"jid": jid, "jobtype": "t", "keep_result_for": 60}
        )
        assert r.status_code == 201, r.text
    polls = [
        asyncio.create_task(fwp.http.get(f"/v1/jobs/{jid}/result", params={"wait": 20}))
        for jid in ("fwp-flush-1", "fwp-flush-2")
    ]
    deadline = time.monotonic() + 10
    while len(fwp.services.hub._result_waiters) < 2:
        assert time.monotonic() < deadline, "the polls never waited"
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # past their first read (a poll is watched before it reads)
    assert not any(p.done() for p in polls)
    conn = await Fwp.connect(fwp.port, wid="w-flush")
    try:
        assert str(await conn.call("FLUSH")) == "+OK"
        flushed = time.monotonic()
        answers = await asyncio.wait_for(asyncio.gather(*polls), 10)
    finally:
        await conn.close()
    assert time.monotonic() - flushed < 0.5
    assert [x.status_code for x in answers] == [404, 404], [x.text for x in answers]
    assert {a.json()["code"] for a in answers} == {"job_not_found"}
