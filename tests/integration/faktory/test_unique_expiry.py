"""Faktory Enterprise's unique and expiring jobs over FWP (custom.unique_for / unique_until and
custom.expires_at / expires_in), with raw commands against an in-process server (manual
clock)."""

from __future__ import annotations

from datetime import timedelta

from tests.integration.faktory.fwp import Fwp


async def test_pushb_reports_notunique_per_jid_and_until_start(fwp):
    conn = await Fwp.connect(fwp.port)
    custom = {"unique_for": 60, "unique_until": "start"}
    job = {"jobtype": "r", "args": [1], "custom": custom}
    assert str(await conn.cmd("PUSH", {**job, "jid": "start-0001"})) == "+OK"
    reply = await conn.cmd(
        "PUSHB", [{**job, "jid": "start-0002"}, {"jobtype": "r", "args": [2], "jid": "plain-001"}]
    )
    rejected = reply.json
    assert list(rejected) == ["start-0002"]
    assert rejected["start-0002"].startswith("NOTUNIQUE") and "start-0001" in rejected["start-0002"]
    # until start: once a worker takes the job, the same job may be pushed again.
    worker = await Fwp.connect(fwp.port, wid="w-unique")
    fetched = (await worker.call("FETCH default")).json
    assert fetched["jid"] in ("start-0001", "plain-001")
    if fetched["jid"] == "plain-001":
        fetched = (await worker.call("FETCH default")).json
    assert fetched["jid"] == "start-0001"
    assert str(await conn.cmd("PUSH", {**job, "jid": "start-0003"})) == "+OK"
    bad = await conn.cmd("PUSH", {**job, "jid": "start-0004", "custom": {"unique_for": -1}})
    assert bad.kind == "-" and bad.text.startswith("ERR") and "unique" in bad.text
    await worker.close()
    await conn.close()


async def test_expiry_from_custom(fwp):
    conn = await Fwp.connect(fwp.port)
    soon = (fwp.clock.now() + timedelta(seconds=10)).isoformat()
    for jid, custom in (("exp-at-001", {"expires_at": soon}), ("exp-in-001", {"expires_in": 10})):
        assert str(await conn.cmd("PUSH", {"jid": jid, "jobtype": "r", "args": [],
                                            "custom": custom})) == "+OK"  # fmt: skip
    fwp.clock.advance(11)
    worker = await Fwp.connect(fwp.port, wid="w-expiry")
    nothing = await worker.call("FETCH default")
    assert nothing.kind == "$" and nothing.text is None
    assert (await fwp.api.maintain())["expired"] == 2
    for jid in ("exp-at-001", "exp-in-001"):
        assert (await fwp.http.get(f"/v1/jobs/{jid}")).json()["state"] == "expired"
    await worker.close()
    await conn.close()
