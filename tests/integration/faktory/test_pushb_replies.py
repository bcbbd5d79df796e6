"""PUSHB's reply map: one entry per job that was not stored, under its jid (or ``#<index>`` for an
item without a usable jid), and the other jobs stored together. A job's batch-level problem (its
batch not open, its unique key repeated in the PUSHB) is that job's entry, never the whole
PUSHB's error."""

from __future__ import annotations

import json
from typing import Any

from tests.integration.faktory.fwp import Fwp, job


async def stored(fwp: Any, jid: str) -> bool:
    status: int = (await fwp.http.get(f"/v1/jobs/{jid}")).status_code
    assert status in (200, 404)
    return status == 200


async def test_a_job_naming_a_batch_it_cannot_join_is_rejected_alone(fwp):
    conn = await Fwp.connect(fwp.port)
    pending = (await conn.call("BATCH NEW {}")).text
    assert str(await conn.cmd("PUSH", job("member-0001", custom={"bid": pending}))) == "+OK"
    assert str(await conn.call(f"BATCH COMMIT {pending}")) == "+OK"
    finished = (await conn.call("BATCH NEW {}")).text
    assert str(await conn.call(f"BATCH COMMIT {finished}")) == "+OK"  # no member: finished
    opened = (await conn.call("BATCH NEW {}")).text
    reply = await conn.cmd(
        "PUSHB",
        [
            job("plain-00001"),
            job("unknown-0001", custom={"bid": "nosuchbid1"}),
            job("committed-01", custom={"bid": pending}),
            job("finished-001", custom={"bid": finished}),
            job("joins-00001", custom={"bid": opened}),
            job("unknown-0002", custom={"bid": "nosuchbid1"}),
        ],
    )
    rejected = reply.json
    assert set(rejected) == {"unknown-0001", "unknown-0002", "committed-01", "finished-001"}
    assert "no batch" in rejected["unknown-0001"] and "no batch" in rejected["unknown-0002"]
    assert "committed" in rejected["committed-01"]
    assert "finished" in rejected["finished-001"]
    assert await stored(fwp, "plain-00001") and await stored(fwp, "joins-00001")
    for jid in rejected:
        assert not await stored(fwp, jid)
    assert (await conn.call(f"BATCH STATUS {opened}")).json["total"] == 1
    await conn.close()


async def test_a_unique_key_twice_rejects_the_later_job_as_notunique(fwp):
    conn = await Fwp.connect(fwp.port)
    unique = {"unique_for": 60}
    reply = await conn.cmd(
        "PUSHB",
        [
            job("plain-00002"),
            job("unique-0001", "u", [1], custom=unique),
            job("unique-0002", "u", [1.0], custom=unique),  # the same key: 1 and 1.0 are equal
            job("unique-0003", "u", [2], custom=unique),
        ],
    )
    rejected = reply.json
    assert list(rejected) == ["unique-0002"]
    assert (
        rejected["unique-0002"].startswith("NOTUNIQUE") and "unique-0001" in rejected["unique-0002"]
    )
    for jid in ("plain-00002", "unique-0001", "unique-0003"):
        assert await stored(fwp, jid)
    assert not await stored(fwp, "unique-0002")
    await conn.close()


async def test_unique_jobs_and_batch_members_are_rejected_per_job(fwp):
    """A job that joins a batch cannot be unique, and one PUSHB cannot store both kinds: the
    unique jobs are the ones refused, each with the reason."""
    conn = await Fwp.connect(fwp.port)
    bid = (await conn.call("BATCH NEW {}")).text
    unique = {"unique_for": 60}
    reply = await conn.cmd(
        "PUSHB",
        [
            job("both-000001", "u", [1], custom={**unique, "bid": bid}),
            job("member-0002", custom={"bid": bid}),
            job("unique-0004", "u", [2], custom=unique),
            job("plain-00003"),
        ],
    )
    rejected = reply.json
    assert set(rejected) == {"both-000001", "unique-0004"}
    assert "unique" in rejected["both-000001"] and "batch" in rejected["both-000001"]
    assert "unique" in rejected["unique-0004"] and "PUSHB" in rejected["unique-0004"]
    assert await stored(fwp, "member-0002") and await stored(fwp, "plain-00003")
    assert str(await conn.cmd("PUSH", job("unique-0004", "u", [2], custom=unique))) == "+OK"
    await conn.close()


async def test_a_jid_reported_rejected_is_not_stored(fwp):
    conn = await Fwp.connect(fwp.port)
    reply = await conn.cmd(
        "PUSHB", [job("twice-00001", args="bad"), job("twice-00001"), job("plain-00004")]
    )
    rejected = reply.json
    assert list(rejected) == ["twice-00001"] and "args" in rejected["twice-00001"]
    assert not await stored(fwp, "twice-00001")
    assert await stored(fwp, "plain-00004")
    await conn.close()


async def test_items_without_a_usable_jid_are_keyed_by_position(fwp):
    """``#<index>`` cannot be a jid (a jid starts with a letter or digit), so it never hides
    another job's entry."""
    conn = await Fwp.connect(fwp.port)
    items = [job("1"), 7, {"jobtype": "t", "args": []}, job("#0"), job("plain-00005")]
    reply = await conn.call("PUSHB " + json.dumps(items))
    rejected = reply.json
    assert set(rejected) == {"1", "#1", "#2", "#3"}
    assert "jid" in rejected["1"] and "JSON object" in rejected["#1"]
    assert "jid" in rejected["#2"] and "jid" in rejected["#3"]
    assert await stored(fwp, "plain-00005")
    await conn.close()
