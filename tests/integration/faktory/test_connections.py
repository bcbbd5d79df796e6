"""Clients that leave abruptly, guess passwords over many connections at once, or put line
breaks in what the server logs."""

from __future__ import annotations

import asyncio
import logging

from tests.integration.faktory.fwp import Fwp


async def job_state(fwp, jid: str, leaving: str, tries: int = 100) -> str:
    """The job's state once it is no longer ``leaving`` (or still it after ``tries`` looks)."""
    state = leaving
    for _ in range(tries):
        state = (await fwp.http.get(f"/v1/jobs/{jid}")).json()["state"]
        if state != leaving:
            break
        await asyncio.sleep(0.05)
    return state


async def test_a_fetch_whose_connection_was_reset_hands_its_job_back(make_fwp, caplog):
    """A reset (RST, not FIN) leaves the reader with an error instead of EOF: the server must
    see the peer gone all the same, and not fail writing to it."""
    fwp = await make_fwp(faktory_fetch_wait=2.0)
    worker = await Fwp.connect(fwp.port, wid="reset-w")
    await worker.send_raw(b"FETCH resetq\r\n")
    await asyncio.sleep(0.2)  # the FETCH is waiting
    worker.reset()
    await asyncio.sleep(0.1)
    r = await fwp.http.post(
        "/v1/jobs", json={"jid": "reset-job-1", "jobtype": "t", "queue": "resetq"}
    )
    assert r.status_code == 201, r.text
    # The push may hand the job to the waiting FETCH; once that FETCH ends it must be back.
    assert await job_state(fwp, "reset-job-1", "active") == "available"
    job = (await fwp.http.get("/v1/jobs/reset-job-1")).json()
    assert (job["wid"], job["attempt"]) == (None, 0)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


async def test_wrong_passwords_over_parallel_connections_are_limited(make_fwp):
    """Connections accepted before the limit was reached still count: each password check
    looks at the limit first."""
    app = await make_fwp(faktory_password="s3cret", auth_failures_per_minute=3)
    conns = [await Fwp.open(app.port) for _ in range(10)]
    for conn in conns:
        hi = await conn.read()
        assert hi.kind == "+", hi
    for conn in conns:
        await conn.send_raw(b'HELLO {"v": 2, "pwdhash": "' + b"00" * 32 + b'"}\r\n')
    replies = [str(await conn.read()) for conn in conns]
    assert replies.count("-ERR Invalid password") == 3, replies
    assert all(r == "-ERR Invalid password" or "too many wrong passwords" in r for r in replies), (
        replies
    )
    for conn in conns:
        assert await conn.closed()
        await conn.close()
    good = await Fwp.open(app.port)
    reply = await good.read()  # the address is blocked, even with the right password
    assert reply.kind == "-" and "too many wrong passwords" in str(reply)
    await good.close()


async def test_client_text_cannot_forge_log_lines(fwp, caplog):
    forged = "probe\n2030-01-01 00:00:00,000 ERROR werk.faktory.server: FORGED\r"
    conn = await Fwp.connect(fwp.port, hostname=forged)
    with caplog.at_level(logging.DEBUG, logger="werk.faktory"):
        assert str(await conn.call("FLUSH")) == "+OK"
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("werk.faktory")]
    assert any("FORGED" in message for message in logged), logged
    assert not any("\n" in m or "\r" in m for m in logged), logged
    await conn.close()
