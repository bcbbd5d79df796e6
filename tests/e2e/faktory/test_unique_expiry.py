"""Faktory Enterprise's unique and expiring jobs over FWP: custom.unique_for / unique_until and
custom.expires_at / expires_in, with the real PyPI `faktory` client against `werk serve` and
with raw commands against an in-process server (manual clock)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from tests.integration.faktory.fwp import Fwp

faktory = pytest.importorskip(
    "faktory",
    reason="Python client tests SKIPPED: PyPI `faktory` is missing; install the dev extras: "
    ".venv/bin/uv pip install --python .venv/bin/python -r requirements.lock",
)


def test_the_python_client_meets_notunique(fwp_server):
    url = fwp_server.faktory_url()
    custom = {"unique_for": 600}
    with faktory.Client(faktory=url) as client:
        assert client.queue("report", args=[1], queue="u", jid="uniq-0001", custom=custom)
        # A second push of the same job is refused: the client reports False.
        assert not client.queue("report", args=[1], queue="u", jid="uniq-0002", custom=custom)
        # The refusal is Faktory's NOTUNIQUE, naming the job that holds the lock.
        client.faktory.reply(
            "PUSH",
            {"jid": "uniq-0003", "jobtype": "report", "args": [1.0], "queue": "u",
             "custom": custom},
        )  # fmt: skip
        reply = next(client.faktory.get_message())
        assert reply.startswith("NOTUNIQUE ") and "uniq-0001" in reply
        assert client.queue("report", args=[2], queue="u", jid="uniq-0004", custom=custom)
    jobs = httpx.get(f"{fwp_server.url}/v1/jobs", params={"queue": "u"}).json()["jobs"]
    assert sorted(j["jid"] for j in jobs) == ["uniq-0001", "uniq-0004"]
    stored = httpx.get(f"{fwp_server.url}/v1/jobs/uniq-0001").json()
    assert stored["unique"]["for"] == 600 and stored["unique"]["until"] == "success"


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
