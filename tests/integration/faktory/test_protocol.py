"""Faktory's wire protocol over a raw socket: every command and error path, against the
in-process app (manual clock) with its FWP listener on a free port."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.integration.faktory.fwp import Fwp, job, pwdhash
from tests.support.helpers import count_jobs, sql

# -- handshake ---------------------------------------------------------------------------------


async def test_greeting_is_compact_and_hello_answers_ok(fwp):
    conn = await Fwp.open(fwp.port)
    hi = await conn.reader.readuntil(b"\r\n")
    assert hi == b'+HI {"v":2}\r\n'
    assert str(await conn.cmd("HELLO", {"hostname": "h", "v": 2})) == "+OK"
    await conn.close()


async def test_hello_registers_the_worker(fwp, database_url):
    conn = await Fwp.connect(fwp.port, wid="wid-hello", labels=["a", "b"], pid=4242)
    rows = await sql(
        database_url, "SELECT pid, labels, state FROM werk_workers WHERE wid = $1", "wid-hello"
    )
    assert [(r["pid"], r["labels"], r["state"]) for r in rows] == [(4242, ["a", "b"], "running")]
    await conn.close()


async def test_password_with_iterations(make_fwp):
    app = await make_fwp(faktory_password="s3cret")
    good = await Fwp.connect(app.port, password="s3cret", v=2)
    assert good.greeting["v"] == 2 and good.greeting["i"] >= 1 and good.greeting["s"]
    assert str(await good.call("INFO"))[0] == "$"
    await good.close()

    wrong = await Fwp.open(app.port)
    reply = await wrong.handshake(password="nope", v=2)
    assert str(reply) == "-ERR Invalid password"
    assert await wrong.closed()

    missing = await Fwp.open(app.port)
    reply = await missing.handshake(v=2)  # no pwdhash at all
    assert str(reply) == "-ERR Invalid password"
    assert await missing.closed()


async def test_password_hashed_once_without_protocol_version(make_fwp):
    """The Python client sends no "v" and hashes once; that must be accepted."""
    app = await make_fwp(faktory_password="s3cret")
    conn = await Fwp.open(app.port)
    hi = await conn.read()
    greeting = json.loads(hi.text[3:])
    once = pwdhash("s3cret", greeting["s"], 1)
    reply = await conn.cmd("HELLO", {"hostname": "py", "pid": 1, "labels": [], "pwdhash": once})
    assert str(reply) == "+OK"
    await conn.close()

    conn = await Fwp.open(app.port)
    hi = await conn.read()
    greeting = json.loads(hi.text[3:])
    if greeting["i"] > 1:  # v2 with a single iteration is wrong
        bad = pwdhash("s3cret", greeting["s"], 1)
        reply = await conn.cmd("HELLO", {"hostname": "n", "v": 2, "pwdhash": bad})
        assert str(reply) == "-ERR Invalid password"
    await conn.close()


async def test_command_before_hello_is_refused_and_closed(fwp):
    conn = await Fwp.open(fwp.port)
    await conn.read()  # HI
    reply = await conn.cmd("PUSH", job("abcdefgh"))
    assert reply.kind == "-" and "HELLO" in reply.text
    assert await conn.closed()


async def test_malformed_hello_is_refused(fwp):
    conn = await Fwp.open(fwp.port)
    await conn.read()
    reply = await conn.call("HELLO {not json")
    assert reply.kind == "-" and "JSON" in reply.text
    assert await conn.closed()


async def test_handshake_timeout(make_fwp):
    app = await make_fwp(faktory_handshake_timeout=0.3)
    conn = await Fwp.open(app.port)
    await conn.read()
    reply = await conn.read(timeout=3)
    assert reply.kind == "-" and "handshake timeout" in reply.text
    assert await conn.closed()


async def test_idle_connections_are_closed(make_fwp):
    app = await make_fwp(faktory_idle_timeout=0.3)
    conn = await Fwp.connect(app.port)
    assert await conn.closed(timeout=3)


async def test_half_sent_lines_are_closed_at_their_deadlines(make_fwp, database_url):
    """A command that never ends holds its connection no longer than silence would: the idle
    deadline covers the whole line, and the handshake's covers a half-sent HELLO."""
    app = await make_fwp(faktory_idle_timeout=0.3, faktory_handshake_timeout=0.3)
    conn = await Fwp.connect(app.port)
    await conn.send_raw(b'PUSH {"jid":"half-sent-1","jobtype":"x","ar')
    assert await conn.closed(timeout=3)

    hello = await Fwp.open(app.port)
    await hello.read()  # HI
    await hello.send_raw(b'HELLO {"hostname":"h",')
    reply = await hello.read(timeout=3)
    assert reply.kind == "-" and "handshake timeout" in reply.text
    assert await hello.closed()
    assert await count_jobs(database_url) == 0


# -- framing and limits ------------------------------------------------------------------------


async def test_unknown_and_malformed_commands_keep_the_connection(fwp):
    conn = await Fwp.connect(fwp.port)
    assert str(await conn.call("FROB x")) == "-ERR unknown command FROB"
    await conn.send_raw(b"PUSH \xff\xfe\r\n")
    reply = await conn.read()
    assert reply.kind == "-" and "UTF-8" in reply.text
    assert (await conn.call("PUSH {oops")).kind == "-"
    await conn.send_raw(b"\r\n")  # a blank line is no command and gets no reply
    assert str(await conn.call("HELLO {}")).startswith("-ERR HELLO was already")
    assert str(await conn.cmd("PUSH", job("still-ok-1"))) == "+OK"
    # Bare "\n" line endings work too.
    await conn.send_raw(b'ACK {"jid":"still-ok-1"}\n')
    assert str(await conn.read()) == "+OK"
    await conn.close()


async def test_too_long_line_is_refused_and_closed(make_fwp):
    app = await make_fwp(faktory_max_line_bytes=2048)
    conn = await Fwp.connect(app.port)
    big = job("longline1", args=["x" * 5000])
    reply = await conn.cmd("PUSH", big)
    assert reply.kind == "-" and "line too long" in reply.text
    assert await conn.closed()
    # Other connections are unaffected.
    other = await Fwp.connect(app.port)
    assert str(await other.cmd("PUSH", job("shortline1"))) == "+OK"
    await other.close()


async def test_connection_limit(make_fwp):
    app = await make_fwp(faktory_max_connections=2)
    a = await Fwp.connect(app.port)
    b = await Fwp.connect(app.port)
    c = await Fwp.open(app.port)
    reply = await c.read()
    assert reply.kind == "-" and "too many connections" in reply.text
    assert await c.closed()
    await a.send_raw(b"END\r\n")
    assert await a.closed()
    for _ in range(50):  # the server notices the END and frees the slot
        d = await Fwp.open(app.port)
        first = await d.read()
        if first.kind == "+":
            break
        await d.close()
        await asyncio.sleep(0.05)
    assert first.text.startswith("HI ")
    await d.close()
    await b.close()


async def test_end_closes_without_reply(fwp):
    conn = await Fwp.connect(fwp.port)
    await conn.send_raw(b"END\r\n")
    assert await conn.closed()


# -- PUSH and PUSHB ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{bad json", "invalid JSON"),
        ("[1,2]", "JSON object"),
        (json.dumps({"jid": "short", "jobtype": "t", "args": []}), "jid"),
        (json.dumps({"jobtype": "t", "args": []}), "jid"),
        (json.dumps({"jid": "abcdefgh", "args": []}), "jobtype"),
        (json.dumps({"jid": "abcdefgh", "jobtype": "t"}), "args"),
        (json.dumps({"jid": "abcdefgh", "jobtype": "t", "args": None}), "args"),
        (
            json.dumps({"jid": "abcdefgh", "jobtype": "t", "args": [], "reserve_for": 86401}),
            "reserve_for",
        ),
        (json.dumps({"jid": "abcdefgh", "jobtype": "t", "args": [], "at": "tomorrow"}), "at"),
        (
            json.dumps({"jid": "abcdefgh", "jobtype": "t", "args": [], "queue": "no spaces"}),
            "queue",
        ),
        (json.dumps({"jid": "abcdefgh", "jobtype": "t", "args": ["a\u0000b"]}), "NUL"),
        (json.dumps({"jid": "abcdefgh", "jobtype": "t", "args": [], "custom": [1]}), "custom"),
        (json.dumps({"jid": "abcdefgh", "jobtype": "t", "args": [], "retry": "x"}), "retry"),
        ('{"jid": "abcdefgh", "jobtype": "t", "args": [18446744073709551616]}', "64 bits"),
        ('{"jid": "abcdefgh", "jobtype": "t", "args": [NaN]}', "invalid JSON"),
        ('{"jid": "abcdefgh", "jobtype": "t", "args": ["\\ud800"]}', "surrogate"),
        ('{"jid": "abcdefgh", "jobtype": "t", "args": ' + "[" * 100 + "]" * 100 + "}", "nested"),
        ('{"jid": "abcdefgh", "jobtype": "t", "args": ' + "[" * 5000 + "]" * 5000 + "}", "nested"),
    ],
)
async def test_push_errors(fwp, payload, reason):
    conn = await Fwp.connect(fwp.port)
    reply = await conn.call("PUSH " + payload)
    assert reply.kind == "-" and reason in reply.text, reply
    assert str(await conn.cmd("PUSH", job("after-error"))) == "+OK"  # still usable
    await conn.close()


async def test_push_defaults_and_faktory_rules(fwp):
    conn = await Fwp.connect(fwp.port)
    pushed = {
        "jid": "defaults1",
        "jobtype": "Mail",
        "args": [1, {"a": "b"}],
        "priority": 5,
        "reserve_for": 10,
        "unknown_key": True,
        "created_at": "ignored",
    }
    assert str(await conn.cmd("PUSH", pushed)) == "+OK"
    j = (await fwp.http.get("/v1/jobs/defaults1")).json()
    assert (j["jobtype"], j["args"], j["queue"], j["priority"]) == (
        "Mail",
        [1, {"a": "b"}],
        "default",
        0,
    )
    assert (j["reserve_for"], j["retry"], j["state"]) == (60, 25, "available")

    future = {
        "jid": "future01",
        "jobtype": "t",
        "args": [],
        "at": "2999-01-01T00:00:00Z",
        "retry": 0,
        "queue": "low",
        "custom": {"k": 1},
        "priority": 9,
    }
    assert str(await conn.cmd("PUSH", future)) == "+OK"
    j = (await fwp.http.get("/v1/jobs/future01")).json()
    assert (j["state"], j["retry"], j["queue"], j["custom"], j["priority"]) == (
        "scheduled",
        0,
        "low",
        {"k": 1},
        4,
    )
    # The same jid again stores nothing new (Werk's pushes are idempotent).
    assert str(await conn.cmd("PUSH", dict(future, args=[2]))) == "+OK"
    assert (await fwp.http.get("/v1/jobs/future01")).json()["args"] == []
    await conn.close()


async def test_pushb(fwp):
    conn = await Fwp.connect(fwp.port)
    reply = await conn.cmd("PUSHB", [job("bulk-ok-1"), job("bulk-ok-2", queue="q2")])
    assert reply.kind == "$" and reply.text == "{}"
    reply = await conn.cmd(
        "PUSHB",
        [job("bulk-ok-3"), job("short"), {"jid": "bulk-no-type", "args": []}, job("bulk-ok-3")],
    )
    assert set(reply.json) == {"short", "bulk-no-type", "bulk-ok-3"}
    assert "jid" in reply.json["short"] and "jobtype" in reply.json["bulk-no-type"]
    for jid in ("bulk-ok-1", "bulk-ok-2", "bulk-ok-3"):
        assert (await fwp.http.get(f"/v1/jobs/{jid}")).status_code == 200
    assert (await conn.cmd("PUSHB", {"jid": "x"})).kind == "-"
    await conn.close()


# -- FETCH, ACK, FAIL --------------------------------------------------------------------------


async def test_fetch_in_strict_queue_order_and_nil_when_empty(fwp):
    conn = await Fwp.connect(fwp.port, wid="order-w")
    for jid, queue in [("low-0001", "low"), ("high-0001", "high"), ("low-0002", "low")]:
        assert str(await conn.cmd("PUSH", job(jid, queue=queue))) == "+OK"
    got = [(await conn.call("FETCH high low")).json["jid"] for _ in range(3)]
    assert got == ["high-0001", "low-0001", "low-0002"]
    started = time.monotonic()
    reply = await conn.call("FETCH high low")
    assert reply.kind == "$" and reply.text is None  # $-1, never $0
    assert time.monotonic() - started >= 0.25  # it blocked for the fetch wait
    reply = await conn.call("FETCH")
    assert reply.kind == "-" and "queue" in reply.text
    await conn.close()


async def test_fetch_blocks_until_a_push(make_fwp):
    app = await make_fwp(faktory_fetch_wait=2.0)
    worker = await Fwp.connect(app.port, wid="block-w")
    producer = await Fwp.connect(app.port)
    started = time.monotonic()
    fetch = asyncio.create_task(worker.call("FETCH blockq"))
    await asyncio.sleep(0.3)
    assert str(await producer.cmd("PUSH", job("wake-0001", queue="blockq"))) == "+OK"
    reply = await fetch
    assert reply.json["jid"] == "wake-0001"
    assert time.monotonic() - started < 1.5
    await worker.close()
    await producer.close()


async def test_a_job_reserved_for_a_fetch_whose_client_left_goes_back(make_fwp, database_url):
    """The worker closed its connection while its FETCH blocked; a push hands the job to that
    FETCH, whose reply has nowhere to go: the job is available again, not reserved for the
    connection that left."""
    app = await make_fwp(faktory_fetch_wait=2.0)
    worker = await Fwp.connect(app.port, wid="gone-w")
    await worker.send_raw(b"FETCH goneq\r\n")
    await asyncio.sleep(0.2)
    await worker.close()
    await asyncio.sleep(0.2)
    r = await app.http.post("/v1/jobs", json={"jobtype": "x", "jid": "left-0001", "queue": "goneq"})
    assert r.status_code == 201
    for _ in range(100):  # the FETCH returns within its 2 s wait
        (row,) = await sql(database_url, "SELECT state, wid, attempt FROM werk_jobs")
        if row["state"] == "available":
            break
        await asyncio.sleep(0.05)
    assert (row["state"], row["wid"], row["attempt"]) == ("available", None, 0)


async def test_fetched_job_json(fwp):
    conn = await Fwp.connect(fwp.port, wid="json-w")
    await conn.cmd("PUSH", job("jsonjob1", "Report", [1, "two"], custom={"x": 1}, priority=7))
    j = (await conn.call("FETCH default")).json
    assert j["jid"] == "jsonjob1" and j["jobtype"] == "Report" and j["args"] == [1, "two"]
    assert j["queue"] == "default" and j["custom"] == {"x": 1} and j["priority"] == 7
    assert j["reserve_for"] == 1800 and j["retry"] == 25
    assert j["created_at"].endswith("Z") and j["enqueued_at"].endswith("Z")
    assert "failure" not in j
    await conn.close()


async def test_ack_completes_and_unknown_jid_is_ok(fwp):
    conn = await Fwp.connect(fwp.port, wid="ack-w")
    await conn.cmd("PUSH", job("ackjob01"))
    assert (await conn.call("FETCH default")).json["jid"] == "ackjob01"
    assert str(await conn.cmd("ACK", {"jid": "ackjob01"})) == "+OK"
    assert (await fwp.http.get("/v1/jobs/ackjob01")).status_code == 404
    assert str(await conn.cmd("ACK", {"jid": "never-existed"})) == "+OK"
    assert (await conn.cmd("ACK", {"nojid": 1})).kind == "-"
    info = (await conn.call("INFO")).json
    assert info["faktory"]["total_processed"] == 1
    await conn.close()


async def test_late_ack_does_not_complete_a_newer_attempt(fwp):
    """Worker A's reservation expires, the job is retried and reserved by worker B: A's ACK is
    answered +OK (as Faktory does) but changes nothing; A's FAIL is refused; B's ACK counts."""
    a = await Fwp.connect(fwp.port, wid="late-a")
    b = await Fwp.connect(fwp.port, wid="late-b")
    await a.cmd("PUSH", job("latejob1", reserve_for=60))
    assert (await a.call("FETCH default")).json["jid"] == "latejob1"
    fwp.clock.advance(61)
    await fwp.api.maintain()  # the expired reservation fails (ReservationExpired) and retries
    fwp.clock.advance(10_000)
    await fwp.api.maintain()  # the retry is due
    fetched = (await b.call("FETCH default")).json
    assert fetched["jid"] == "latejob1"
    assert fetched["failure"]["errtype"] == "ReservationExpired"
    assert str(await a.cmd("ACK", {"jid": "latejob1"})) == "+OK"
    j = (await fwp.http.get("/v1/jobs/latejob1")).json()
    assert (j["state"], j["wid"]) == ("active", "late-b")
    assert str(await a.cmd("FAIL", {"jid": "latejob1", "message": "late"})) == (
        "-ERR Job not found latejob1"
    )
    assert str(await b.cmd("ACK", {"jid": "latejob1"})) == "+OK"
    assert (await fwp.http.get("/v1/jobs/latejob1")).status_code == 404
    await a.close()
    await b.close()


async def test_producer_connection_fetches_under_its_own_wid(fwp):
    a = await Fwp.connect(fwp.port)
    b = await Fwp.connect(fwp.port)
    await a.cmd("PUSH", job("prodjob1"))
    assert (await a.call("FETCH default")).json["jid"] == "prodjob1"
    assert str(await b.cmd("ACK", {"jid": "prodjob1"})) == "+OK"  # not b's reservation
    assert (await fwp.http.get("/v1/jobs/prodjob1")).json()["state"] == "active"
    assert str(await a.cmd("ACK", {"jid": "prodjob1"})) == "+OK"
    assert (await fwp.http.get("/v1/jobs/prodjob1")).status_code == 404
    await a.close()
    await b.close()


async def test_null_means_not_given(fwp):
    """As over HTTP: a client that sends an optional field it was not given as null gets the
    default."""
    conn = await Fwp.connect(fwp.port, wid="null-w")
    optional = ("queue", "priority", "reserve_for", "retry", "backtrace", "custom", "at")
    pushed = {"jid": "nulls001", "jobtype": "t", "args": [], **dict.fromkeys(optional)}
    assert str(await conn.cmd("PUSH", pushed)) == "+OK"
    j = (await fwp.http.get("/v1/jobs/nulls001")).json()
    assert (j["queue"], j["priority"], j["reserve_for"], j["retry"]) == ("default", 0, 1800, 25)
    assert (j["backtrace"], j["custom"], j["at"], j["state"]) == (0, {}, None, "available")
    assert (await conn.call("FETCH default")).json["jid"] == "nulls001"
    report = {"jid": "nulls001", "errtype": None, "message": None, "backtrace": None}
    assert str(await conn.cmd("FAIL", report)) == "+OK"
    failure = (await fwp.http.get("/v1/jobs/nulls001")).json()["failure"]
    assert (failure["errtype"], failure["message"], failure["backtrace"]) == ("unknown", "", [])
    beat = {"wid": "null-w", "current_state": None, "rss_kb": None}
    assert str(await conn.cmd("BEAT", beat)) == "+OK"
    reply = await conn.cmd("PUSH", {"jid": "nulls002", "jobtype": "t", "args": None})
    assert reply.kind == "-" and "args" in reply.text  # required by Faktory: null is not given
    await conn.close()


async def test_fail_records_the_failure_and_retries(fwp):
    conn = await Fwp.connect(fwp.port, wid="fail-w")
    await conn.cmd("PUSH", job("failjob1", retry=3))
    await conn.call("FETCH default")
    report = {
        "jid": "failjob1",
        "errtype": "E" * 150,
        "message": "m" * 1500,
        "backtrace": [f"line {i}" for i in range(80)],
    }
    assert str(await conn.cmd("FAIL", report)) == "+OK"
    j = (await fwp.http.get("/v1/jobs/failjob1")).json()
    assert j["state"] == "scheduled"
    f = j["failure"]
    assert (f["retry_count"], f["remaining"]) == (1, 2)
    assert f["errtype"] == "E" * 100 and f["message"] == "m" * 1000
    assert f["backtrace"] == [f"line {i}" for i in range(50)]
    assert f["next_at"] is not None
    info = (await conn.call("INFO")).json["faktory"]
    assert (info["total_processed"], info["total_failures"]) == (1, 1)
    assert info["tasks"]["Retries"]["size"] == 1

    # After the backoff the job comes back with its failure attached.
    fwp.clock.advance(10_000)
    await fwp.api.maintain()
    again = (await conn.call("FETCH default")).json
    assert again["failure"]["errtype"] == "E" * 100 and again["failure"]["retry_count"] == 1
    reply = await conn.call('FAIL {"jid": "failjob1", "errtype": "", "message": "x\\ud800y"}')
    assert str(reply) == "+OK"
    failure = (await fwp.http.get("/v1/jobs/failjob1")).json()["failure"]
    assert (failure["errtype"], failure["message"]) == ("unknown", "x?y")

    assert str(await conn.cmd("FAIL", {"jid": "nosuchjob"})) == "-ERR Job not found nosuchjob"
    assert (await conn.call("FAIL {broken")).kind == "-"
    await conn.close()


async def test_fail_with_retry_zero_discards_and_minus_one_is_dead(fwp):
    conn = await Fwp.connect(fwp.port, wid="fail2-w")
    await conn.cmd("PUSH", job("discard1", retry=0))
    await conn.cmd("PUSH", job("deadjob1", retry=-1))
    for _ in range(2):
        jid = (await conn.call("FETCH default")).json["jid"]
        assert str(await conn.cmd("FAIL", {"jid": jid, "errtype": "Boom"})) == "+OK"
    assert (await fwp.http.get("/v1/jobs/discard1")).status_code == 404
    assert (await fwp.http.get("/v1/jobs/deadjob1")).json()["state"] == "dead"
    await conn.close()


# -- BEAT --------------------------------------------------------------------------------------


async def test_beat_states(fwp, database_url):
    conn = await Fwp.connect(fwp.port, wid="beat-w")
    assert str(await conn.cmd("BEAT", {"wid": "beat-w"})) == "+OK"
    assert (
        str(await conn.cmd("BEAT", {"wid": "beat-w", "current_state": "quiet", "rss_kb": 1234}))
        == "+OK"
    )
    rows = await sql(
        database_url, "SELECT rss_kb, reported_state FROM werk_workers WHERE wid=$1", "beat-w"
    )
    assert (rows[0]["rss_kb"], rows[0]["reported_state"]) == (1234, "quiet")

    r = await fwp.http.post("/v1/workers/beat-w/quiet")  # the operator API
    assert r.status_code == 200
    reply = await conn.cmd("BEAT", {"wid": "beat-w"})
    assert reply.kind == "$" and reply.text == '{"state":"quiet"}'
    assert (await fwp.http.post("/v1/workers/beat-w/terminate")).status_code == 200
    reply = await conn.cmd("BEAT", {"wid": "beat-w"})
    assert reply.text == '{"state":"terminate"}'
    await fwp.http.post("/v1/workers/beat-w/quiet")  # states only move forward
    assert (await conn.cmd("BEAT", {"wid": "beat-w"})).text == '{"state":"terminate"}'

    # Another connection of the same worker process may beat for it; strangers may not.
    other = await Fwp.connect(fwp.port)
    assert (await other.cmd("BEAT", {"wid": "beat-w"})).text == '{"state":"terminate"}'
    assert str(await other.cmd("BEAT", {"wid": "stranger"})) == "-ERR unknown worker stranger"
    assert (await other.cmd("BEAT", {"nowid": 1})).kind == "-"
    await other.close()
    await conn.close()


# -- INFO, FLUSH -------------------------------------------------------------------------------


async def test_info_shape(fwp):
    conn = await Fwp.connect(fwp.port, wid="info-w")
    await conn.cmd("PUSH", job("infojob1", queue="a"))
    await conn.cmd("PUSH", job("infojob2", queue="a"))
    await conn.cmd("PUSH", job("infojob3", queue="b"))
    await conn.cmd("PUSH", job("infojob4", at="2999-01-01T00:00:00Z"))
    info = (await conn.call("INFO")).json
    assert set(info) >= {"now", "server_utc_time", "faktory", "server"}
    f = info["faktory"]
    assert f["queues"] == {"a": 2, "b": 1}
    assert (f["total_enqueued"], f["total_queues"]) == (3, 2)
    assert f["tasks"]["Scheduled"]["size"] == 1
    assert {"Retries", "Dead", "Busy", "Workers"} <= set(f["tasks"])
    assert f["tasks"]["Workers"]["size"] == 1
    assert set(f) >= {"total_processed", "total_failures", "sets"}
    s = info["server"]
    assert set(s) >= {
        "description",
        "faktory_version",
        "uptime",
        "connections",
        "command_count",
        "used_memory_mb",
    }
    assert s["connections"] == 1 and s["command_count"] >= 5
    await conn.close()


async def test_flush_wipes_jobs_and_counters(fwp):
    conn = await Fwp.connect(fwp.port, wid="flush-w")
    await conn.cmd("PUSH", job("flushjob1"))
    await conn.cmd("PUSH", job("flushjob2"))
    await conn.call("FETCH default")
    await conn.cmd("ACK", {"jid": "flushjob1"})
    assert str(await conn.call("FLUSH")) == "+OK"
    info = (await conn.call("INFO")).json["faktory"]
    assert info["queues"] == {} and info["total_processed"] == 0
    assert (await fwp.http.get("/v1/jobs/flushjob2")).status_code == 404
    await conn.close()


# -- QUEUE -------------------------------------------------------------------------------------


async def test_queue_pause_resume_remove_latency(fwp):
    conn = await Fwp.connect(fwp.port, wid="queue-w")
    await conn.cmd("PUSH", job("qjob0001", queue="qa"))
    await conn.cmd("PUSH", job("qjob0002", queue="qb"))
    assert str(await conn.call("QUEUE PAUSE qa")) == "+OK"
    assert (await conn.call("FETCH qa")).text is None
    fwp.clock.advance(5)
    latency = (await conn.call("QUEUE LATENCY qa qb")).json
    assert latency == {"qa": pytest.approx(5), "qb": pytest.approx(5)}
    assert str(await conn.call("QUEUE RESUME qa")) == "+OK"
    assert (await conn.call("FETCH qa")).json["jid"] == "qjob0001"
    assert str(await conn.call("QUEUE REMOVE qb")) == "+OK"
    assert (await fwp.http.get("/v1/jobs/qjob0002")).status_code == 404
    await conn.cmd("PUSH", job("qjob0003", queue="qc"))
    assert str(await conn.call("QUEUE PAUSE *")) == "+OK"
    assert (await conn.call("FETCH qc")).text is None
    assert str(await conn.call("QUEUE RESUME *")) == "+OK"
    assert (await conn.call("FETCH qc")).json["jid"] == "qjob0003"
    assert (await conn.call("QUEUE PAUSE")).kind == "-"
    assert (await conn.call("QUEUE FREEZE qa")).kind == "-"
    assert (await conn.call("QUEUE PAUSE bad/name")).kind == "-"
    await conn.close()


# -- MUTATE ------------------------------------------------------------------------------------


async def _make_sets(fwp, conn):
    """Two retries, one dead job, two scheduled jobs."""
    for jid, jobtype, retry in [("retry001", "A", 5), ("retry002", "B", 5), ("dead0001", "A", -1)]:
        args = ["needle"] if jid == "retry002" else []
        await conn.cmd("PUSH", job(jid, jobtype, args, retry=retry))
        assert (await conn.call("FETCH default")).json["jid"] == jid
        assert str(await conn.cmd("FAIL", {"jid": jid, "errtype": "E"})) == "+OK"
    for jid in ("sched001", "sched002"):
        await conn.cmd("PUSH", job(jid, at="2999-01-01T00:00:00Z"))


async def _states(fwp, *jids):
    out = {}
    for jid in jids:
        r = await fwp.http.get(f"/v1/jobs/{jid}")
        out[jid] = r.json()["state"] if r.status_code == 200 else None
    return out


async def test_mutate(fwp):
    conn = await Fwp.connect(fwp.port, wid="mutate-w")
    await _make_sets(fwp, conn)
    info = (await conn.call("INFO")).json["faktory"]["tasks"]
    assert (info["Retries"]["size"], info["Dead"]["size"], info["Scheduled"]["size"]) == (2, 1, 2)

    # kill the retries of jobtype B -> dead
    reply = await conn.cmd(
        "MUTATE", {"cmd": "kill", "target": "retries", "filter": {"jobtype": "B"}}
    )
    assert str(reply) == "+OK"
    assert await _states(fwp, "retry001", "retry002") == {
        "retry001": "scheduled",
        "retry002": "dead",
    }
    # requeue dead jobs whose JSON matches a glob
    reply = await conn.cmd(
        "MUTATE", {"cmd": "requeue", "target": "dead", "filter": {"regexp": "*needle*"}}
    )
    assert str(reply) == "+OK"
    assert await _states(fwp, "retry002", "dead0001") == {
        "retry002": "available",
        "dead0001": "dead",
    }
    # discard by jid
    reply = await conn.cmd(
        "MUTATE", {"cmd": "discard", "target": "scheduled", "filter": {"jids": ["sched001"]}}
    )
    assert str(reply) == "+OK"
    assert await _states(fwp, "sched001", "sched002") == {"sched001": None, "sched002": "scheduled"}
    # clear a whole set (filters ignored)
    reply = await conn.cmd(
        "MUTATE", {"cmd": "clear", "target": "dead", "filter": {"jobtype": "nothing"}}
    )
    assert str(reply) == "+OK"
    assert await _states(fwp, "dead0001") == {"dead0001": None}
    # requeued jobs are fetchable at once
    assert (await conn.call("FETCH default")).json["jid"] == "retry002"

    for bad in [
        {"cmd": "explode", "target": "dead"},
        {"cmd": "kill", "target": "nowhere"},
        {"cmd": "kill"},
        {"cmd": "kill", "target": "dead", "filter": {"jids": "x"}},
    ]:
        assert (await conn.cmd("MUTATE", bad)).kind == "-", bad
    assert (await conn.call("MUTATE [1]")).kind == "-"
    await conn.close()


async def test_glob_translation():
    from werk.faktory.commands import glob_to_regex

    assert glob_to_regex("*needle*") == "^.*needle.*$"
    assert glob_to_regex("a?c") == "^a.c$"
    assert glob_to_regex("[ab]x") == "^[ab]x$"
    assert glob_to_regex("a.b") == "^a\\.b$"
    assert glob_to_regex("\\*") == "^\\*$"


async def test_database_outage_answers_without_killing_workers(fwp, monkeypatch):
    """A FETCH that fails answers "no job" (workers die on a FETCH error); other commands get
    -ERR and the connection stays usable."""

    async def unavailable(*args, **kwargs):
        raise ConnectionRefusedError("database down")

    conn = await Fwp.connect(fwp.port, wid="outage-w")
    monkeypatch.setattr(fwp.services.claim, "fetch", unavailable)
    monkeypatch.setattr(fwp.services.push, "push", unavailable)
    started = time.monotonic()
    reply = await conn.call("FETCH default")
    assert reply.kind == "$" and reply.text is None
    assert time.monotonic() - started >= 0.25  # paced like an empty fetch
    reply = await conn.cmd("PUSH", job("outage01"))
    assert reply.kind == "-" and "database is unavailable" in reply.text
    monkeypatch.undo()
    assert str(await conn.cmd("PUSH", job("outage01"))) == "+OK"
    await conn.close()


async def test_wrong_passwords_are_rate_limited_per_address(make_fwp):
    app = await make_fwp(faktory_password="s3cret", auth_failures_per_minute=2)
    for _ in range(2):
        conn = await Fwp.open(app.port)
        assert str(await conn.handshake(password="wrong")) == "-ERR Invalid password"
        await conn.close()
    blocked = await Fwp.open(app.port)
    reply = await blocked.read()
    assert reply.kind == "-" and "too many wrong passwords" in reply.text
    assert await blocked.closed()
