"""Values Werk can never hold, refused over FWP as over HTTP: each is an ``-ERR`` with a reason
(never an internal error), changes nothing and leaves the connection serving."""

from __future__ import annotations

import logging
import time

import pytest

from tests.integration.faktory.fwp import Fwp, job
from tests.support.helpers import count_jobs, sql
from werk.domain.job import RSS_KB_MAX


def no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


async def test_beat_rss_kb_has_http_bound(fwp, database_url, caplog):
    conn = await Fwp.connect(fwp.port, wid="rss-w")
    for rss in (RSS_KB_MAX + 1, 2**63, 2**64, -1):
        r = await fwp.http.post("/v1/beat", json={"wid": "rss-http", "rss_kb": rss})
        assert r.status_code == 422, r.text
        reply = await conn.cmd("BEAT", {"wid": "rss-w", "rss_kb": rss})
        assert reply.kind == "-" and "rss_kb" in str(reply), reply
    assert str(await conn.cmd("BEAT", {"wid": "rss-w", "rss_kb": RSS_KB_MAX})) == "+OK"
    rows = await sql(database_url, "SELECT rss_kb FROM werk_workers WHERE wid = $1", "rss-w")
    assert rows[0]["rss_kb"] == RSS_KB_MAX
    no_errors_logged(caplog)
    await conn.close()


@pytest.mark.parametrize(
    "line",
    [
        b"BATCH STATUS ab\x00cdefgh",
        b"BATCH OPEN ab\x00cdefgh",
        b"BATCH COMMIT ab\x00cdefgh",
        b"BATCH STATUS ab\xc3\xa9cdefgh",
        b"BATCH COMMIT b-" + b"x" * 100,
        b'BATCH NEW {"parent_bid": "ab\\u0000cdefgh"}',
        b'BATCH NEW {"parent_bid": "ab\\ud800cdefgh"}',
        b'BATCH NEW {"parent_bid": "ab/cdefgh"}',
    ],
)
async def test_a_bid_http_refuses_in_a_path_is_refused(fwp, caplog, line):
    r = await fwp.http.get("/v1/batches/ab%C3%A9cdefgh")
    assert r.status_code == 422, r.text
    conn = await Fwp.connect(fwp.port)
    await conn.send_raw(line + b"\r\n")
    reply = await conn.read()
    assert reply.kind == "-" and "invalid bid" in str(reply), reply
    assert (await conn.call("BATCH NEW {}")).kind == "$"  # still serving
    no_errors_logged(caplog)
    await conn.close()


AT = '{"jid":"%s","jobtype":"t","args":[],"at":"\\ud800"}'
EXPIRES_AT = '{"jid":"%s","jobtype":"t","args":[],"custom":{"expires_at":"\\udfff"}}'
UNTIL = '{"jid":"%s","jobtype":"t","args":[],"custom":{"unique_for":10,"unique_until":"\\ud800"}}'


@pytest.mark.parametrize("template", [AT, EXPIRES_AT, UNTIL])
async def test_a_lone_surrogate_in_a_time_or_name_is_an_invalid_job(
    fwp, database_url, caplog, template
):
    conn = await Fwp.connect(fwp.port)
    reply = await conn.call("PUSH " + template % "surrogate-1")
    assert reply.kind == "-" and "surrogate" in str(reply), reply
    reply = await conn.call('PUSHB [{"jid":"fine-job-01","jobtype":"t","args":[]}, %s]' % (
        template % "surrogate-2"
    ))  # fmt: skip
    rejected = reply.json
    assert list(rejected) == ["surrogate-2"] and "surrogate" in rejected["surrogate-2"]
    assert await count_jobs(database_url) == 1  # fine-job-01
    callback = '{"success": {"jobtype":"cb","custom":{"expires_at":"\\ud800"}}}'
    reply = await conn.call("BATCH NEW " + callback)
    assert reply.kind == "-" and "surrogate" in str(reply), reply
    no_errors_logged(caplog)
    await conn.close()


@pytest.mark.parametrize("names", [["a/b"], ["q\x00x"], ["x" * 101], ["é"], ["fine", "a/b"]])
async def test_fetch_refuses_a_queue_name_werk_cannot_hold(fwp, names):
    r = await fwp.http.post("/v1/fetch", json={"queues": names, "wid": "w", "wait": 0})
    assert r.status_code == 422, r.text
    conn = await Fwp.connect(fwp.port, wid="badq-w")
    started = time.monotonic()
    await conn.send_raw(("FETCH " + " ".join(names) + "\r\n").encode())
    reply = await conn.read()
    assert reply.kind == "-" and "queue" in str(reply), reply
    assert time.monotonic() - started < 0.25  # refused, not waited out
    assert str(await conn.cmd("PUSH", job("after-bad-q"))) == "+OK"
    await conn.close()


@pytest.mark.parametrize("action", ["PAUSE", "RESUME", "REMOVE", "LATENCY"])
async def test_queue_commands_take_as_many_names_as_fetch(fwp, database_url, action):
    conn = await Fwp.connect(fwp.port)
    names = " ".join(f"q{i}" for i in range(101))
    reply = await conn.call(f"QUEUE {action} {names}")
    assert reply.kind == "-" and "100" in str(reply), reply
    assert await sql(database_url, "SELECT name FROM werk_queues") == []
    reply = await conn.call(f"QUEUE {action} " + " ".join(f"q{i}" for i in range(100)))
    assert reply.kind in "+$", reply
    await conn.close()


async def test_queue_names_are_checked_before_any_is_changed(fwp, database_url):
    conn = await Fwp.connect(fwp.port)
    reply = await conn.call("QUEUE PAUSE qa bad/name")
    assert reply.kind == "-" and "queue" in str(reply), reply
    assert await sql(database_url, "SELECT name FROM werk_queues") == []
    await conn.close()


@pytest.mark.parametrize("queue", [False, [], 0, {}])
async def test_a_queue_that_is_no_name_is_refused(fwp, database_url, queue):
    conn = await Fwp.connect(fwp.port)
    reply = await conn.cmd("PUSH", job("badqueue-1", queue=queue))
    assert reply.kind == "-" and "queue" in str(reply), reply
    for jid, given in (("emptyq-001", ""), ("nullq-0001", None)):
        assert str(await conn.cmd("PUSH", job(jid, queue=given))) == "+OK"
        assert (await fwp.http.get(f"/v1/jobs/{jid}")).json()["queue"] == "default"
    assert await count_jobs(database_url) == 2
    await conn.close()


async def test_small_numbers_past_their_bound_are_an_invalid_job(fwp, database_url, caplog):
    conn = await Fwp.connect(fwp.port)
    small = ",".join(["1e-300"] * 219)  # 219 times 300 zeros written out: over the bound
    reply = await conn.call('PUSH {"jid":"small-job-1","jobtype":"t","args":[' + small + "]}")
    assert reply.kind == "-" and "written out in full" in str(reply), reply
    reply = await conn.call('PUSH {"jid":"small-job-2","jobtype":"t","args":[1e-300]}')
    assert reply.kind == "+", reply
    assert await count_jobs(database_url) == 1
    no_errors_logged(caplog)
    await conn.close()
