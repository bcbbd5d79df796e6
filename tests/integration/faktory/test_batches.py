"""Faktory Enterprise's batches over FWP with raw commands (the faktory client on PyPI has no
batch API): BATCH NEW answers a bid, jobs join through custom.bid, BATCH OPEN and COMMIT, BATCH
STATUS with Faktory's fields, child batches by parent_bid, callbacks pushed once."""

from __future__ import annotations

import json

from tests.integration.faktory.fwp import Fwp
from tests.support.helpers import sql


async def status(conn, bid):
    return (await conn.call(f"BATCH STATUS {bid}")).json


async def fetch_all(worker, queue):
    jobs = []
    while (reply := await worker.call(f"FETCH {queue}")).text is not None:
        jobs.append(reply.json)
    return jobs


async def test_a_batch_through_fwp(fwp):
    conn = await Fwp.connect(fwp.port)
    new = {
        "description": "nightly",
        "success": {"jid": "cb-success-1", "jobtype": "ok", "args": [1], "queue": "cb"},
        "complete": {"jobtype": "done", "queue": "cb"},
    }
    reply = await conn.call("BATCH NEW " + json.dumps(new))
    assert reply.kind == "$", reply
    bid = reply.text
    for i in range(3):
        job = {"jid": f"fwp-batch-{i}", "jobtype": "t", "args": [i], "custom": {"bid": bid}}
        assert str(await conn.cmd("PUSH", job)) == "+OK"
    st = await status(conn, bid)
    assert st["bid"] == bid and st["description"] == "nightly" and st["parent_bid"] == ""
    assert (st["total"], st["pending"], st["failed"]) == (3, 3, 0)
    assert (st["complete_st"], st["success_st"]) == ("", "")
    assert {"created_at"} <= set(st)
    # A child batch inside it, opened and committed like Faktory's.
    reply = await conn.call("BATCH NEW " + json.dumps({"parent_bid": bid}))
    child = reply.text
    assert (await status(conn, child))["parent_bid"] == bid
    assert str(await conn.cmd("PUSH", {"jid": "fwp-child-1", "jobtype": "t", "args": [],
                                       "custom": {"bid": child}})) == "+OK"  # fmt: skip
    assert str(await conn.call(f"BATCH COMMIT {child}")) == "+OK"
    assert str(await conn.call(f"BATCH COMMIT {bid}")) == "+OK"
    # Committed: a job naming the batch is refused; opened again, it joins.
    late = {"jid": "fwp-late-01", "jobtype": "t", "args": [], "custom": {"bid": bid}}
    refused = await conn.cmd("PUSH", late)
    assert refused.kind == "-" and "committed" in refused.text
    assert str(await conn.call(f"BATCH OPEN {bid}")) == f"${bid}"  # the bid, as Faktory answers
    assert str(await conn.cmd("PUSH", late)) == "+OK"
    assert str(await conn.call(f"BATCH COMMIT {bid}")) == "+OK"
    assert (await status(conn, bid))["total"] == 5

    worker = await Fwp.connect(fwp.port, wid="w-batch")
    jobs = await fetch_all(worker, "default")
    assert len(jobs) == 5
    assert all(j["custom"]["bid"] in (bid, child) for j in jobs)
    failed = jobs[0]
    reply = await worker.cmd("FAIL", {"jid": failed["jid"], "errtype": "E", "message": "m"})
    assert str(reply) == "+OK"
    for j in jobs[1:]:
        assert str(await worker.cmd("ACK", {"jid": j["jid"]})) == "+OK"
    st = await status(conn, bid)
    assert st["pending"] == 1 and st["complete_st"] == ""  # the failed job waits for its retry
    assert await fetch_all(worker, "cb") == []
    # Its retry succeeds: complete and success are pushed, once.
    r = await fwp.http.post(f"/v1/jobs/{failed['jid']}/retry")
    assert r.status_code == 200, r.text
    (again,) = await fetch_all(worker, "default")
    assert str(await worker.cmd("ACK", {"jid": again["jid"]})) == "+OK"
    st = await status(conn, bid)
    assert (st["pending"], st["complete_st"], st["success_st"]) == (0, "1", "1")
    callbacks = await fetch_all(worker, "cb")
    assert sorted(c["jobtype"] for c in callbacks) == ["done", "ok"]
    for c in callbacks:
        assert str(await worker.cmd("ACK", {"jid": c["jid"]})) == "+OK"
    st = await status(conn, bid)
    assert (st["complete_st"], st["success_st"]) == ("2", "2")
    bad = await conn.call("BATCH STATUS b-nosuchbatch")
    assert bad.kind == "-" and "no batch" in bad.text
    bad = await conn.call(f"BATCH OPEN {bid}")
    assert bad.kind == "-" and "finished" in bad.text
    await worker.close()
    await conn.close()


async def test_mutate_and_flush_count_in_the_batch(fwp, database_url):
    """FWP's MUTATE and FLUSH change members like the HTTP admin actions do: each tells the
    batch (0016_note_settlings.sql), a dead member requeued is pending again."""
    conn = await Fwp.connect(fwp.port)
    bid = (await conn.call("BATCH NEW " + json.dumps({"description": "mutated"}))).text
    dies = {"jid": "fwp-mut-dies", "jobtype": "t", "args": [], "retry": -1, "queue": "mut",
            "custom": {"bid": bid}}  # fmt: skip
    later = {"jid": "fwp-mut-later", "jobtype": "t", "args": [], "at": "2999-01-01T00:00:00Z",
             "custom": {"bid": bid}}  # fmt: skip
    for job in (dies, later):
        assert str(await conn.cmd("PUSH", job)) == "+OK"
    assert str(await conn.call(f"BATCH COMMIT {bid}")) == "+OK"
    worker = await Fwp.connect(fwp.port, wid="w-mutate")
    (got,) = await fetch_all(worker, "mut")
    assert str(await worker.cmd("FAIL", {"jid": got["jid"], "errtype": "E", "message": "m"})) == (
        "+OK"
    )

    async def counts():
        st = await status(conn, bid)
        return st["total"], st["pending"], st["failed"]

    assert await counts() == (2, 1, 1)

    async def mutate(cmd, target, jid):
        reply = await conn.cmd("MUTATE", {"cmd": cmd, "target": target, "filter": {"jids": [jid]}})
        assert str(reply) == "+OK"

    await mutate("requeue", "dead", "fwp-mut-dies")
    assert await counts() == (2, 2, 0)
    await mutate("kill", "scheduled", "fwp-mut-later")
    assert await counts() == (2, 1, 1)
    await mutate("discard", "dead", "fwp-mut-later")  # settled already: counted as it was
    assert await counts() == (2, 1, 1)
    assert str(await conn.call("FLUSH")) == "+OK"  # the requeued member, deleted unsettled
    assert await counts() == (2, 0, 2)
    assert (await sql(database_url, "SELECT count(*) FROM werk_job_deps"))[0][0] == 0
