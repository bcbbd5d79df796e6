"""Times over FWP: a pushed ``at`` beyond what every reader can hold is refused and stores
nothing; a stored one (old data) breaks no FETCH; times go out in UTC as ``Z``."""

from __future__ import annotations

import pytest

from tests.integration.faktory.fwp import Fwp, job
from tests.integration.test_times import OUT_OF_RANGE
from tests.support.helpers import count_jobs, sql


@pytest.mark.parametrize("at", OUT_OF_RANGE)
async def test_push_refuses_a_time_beyond_the_bounds(fwp, database_url, at):
    conn = await Fwp.connect(fwp.port)
    reply = await conn.cmd("PUSH", job("badtime1", at=at))
    assert reply.kind == "-" and "invalid at" in str(reply) and "must lie between" in str(reply)
    assert await count_jobs(database_url) == 0
    reply = await conn.cmd(
        "PUSHB", [job("goodtime", at="2001-01-01T00:00:00Z"), job("badtime2", at=at)]
    )
    rejected = reply.json
    assert list(rejected) == ["badtime2"] and "must lie between" in rejected["badtime2"]
    rows = await sql(database_url, "SELECT jid FROM werk_jobs")
    assert [r["jid"] for r in rows] == ["goodtime"]
    await conn.close()


async def test_fetch_delivers_a_job_stored_with_a_time_beyond_the_bounds(fwp, database_url):
    conn = await Fwp.connect(fwp.port)
    assert str(await conn.cmd("PUSH", job("oldtime1", at="2001-01-01T00:00:00+02:00"))) == "+OK"
    await sql(
        database_url,
        "UPDATE werk_jobs SET at = '0001-01-01T00:00:00+14:00' WHERE jid = 'oldtime1'",
    )
    fetched = (await conn.call("FETCH default")).json
    assert fetched["jid"] == "oldtime1" and fetched["at"] == "0001-01-01T00:00:00Z"
    assert fetched["created_at"].endswith("Z") and fetched["enqueued_at"].endswith("Z")
    assert str(await conn.cmd("ACK", {"jid": "oldtime1"})) == "+OK"
    assert await count_jobs(database_url) == 0
    await conn.close()


async def test_times_go_out_as_z(fwp):
    conn = await Fwp.connect(fwp.port)
    assert str(await conn.cmd("PUSH", job("zonedat1", at="2001-01-01T02:00:00+02:00"))) == "+OK"
    fetched = (await conn.call("FETCH default")).json
    assert fetched["at"] == "2001-01-01T00:00:00Z"
    await conn.close()
