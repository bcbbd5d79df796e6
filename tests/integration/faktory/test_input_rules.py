"""Hostile input over FWP: the jid rule at push, and names the database cannot hold in the
commands that select jobs. Each is an ``-ERR`` with a reason, changes nothing and leaves the
connection serving."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.faktory.fwp import Fwp, job
from tests.support.helpers import count_jobs


async def held_job(fwp: Any) -> dict[str, Any]:
    r = await fwp.http.get("/v1/jobs/heldjob-1")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


@pytest.mark.parametrize(
    "jid", ["tenant/a/job-0001", "../../v1/info", ".hidden-job", "job 0001 x", "jöb-00000001"]
)
async def test_a_jid_that_is_no_path_segment_is_refused_at_push(fwp: Any, jid: str) -> None:
    conn = await Fwp.connect(fwp.port)
    reply = await conn.cmd("PUSH", job(jid))
    assert reply.kind == "-" and "invalid jid" in str(reply), reply
    rejected = (await conn.cmd("PUSHB", [job("fine-jid-1"), job(jid)])).json
    assert list(rejected) == [jid] and "invalid jid" in rejected[jid]
    info = (await fwp.http.get("/v1/info")).json()
    assert info["totals"]["enqueued"] == 1  # fine-jid-1 alone
    assert str(await conn.cmd("PUSH", job("tenant:a:job-1"))) == "+OK"
    assert (await fwp.http.get("/v1/jobs/tenant:a:job-1")).status_code == 200
    await conn.close()


@pytest.mark.parametrize(
    ("verb", "payload", "reason"),
    [
        ("ACK", {"jid": "heldjob-1\x00"}, "ACK jid must not contain NUL"),
        ("ACK", {"jid": "heldjob-1\ud800"}, "ACK jid must not contain lone surrogates"),
        ("FAIL", {"jid": "heldjob-1\x00", "message": "m"}, "FAIL jid must not contain NUL"),
        (
            "MUTATE",
            {"cmd": "kill", "target": "scheduled", "filter": {"jids": ["heldjob-1\x00"]}},
            "MUTATE filter must not contain NUL",
        ),
        (
            "MUTATE",
            {"cmd": "kill", "target": "scheduled", "filter": {"jobtype": "t\x00"}},
            "MUTATE filter must not contain NUL",
        ),
        (
            "MUTATE",
            {"cmd": "kill", "target": "scheduled", "filter": {"regexp": "*\x00*"}},
            "MUTATE filter must not contain NUL",
        ),
    ],
)
async def test_names_the_database_cannot_hold_are_refused(
    fwp: Any, verb: str, payload: dict[str, Any], reason: str
) -> None:
    conn = await Fwp.connect(fwp.port, wid="nul-w")
    await conn.cmd("PUSH", job("heldjob-1"))
    assert (await conn.call("FETCH default")).json["jid"] == "heldjob-1"
    before = (await fwp.http.get("/v1/info")).json()["totals"]
    reply = await conn.cmd(verb, payload)
    assert str(reply).startswith(f"-ERR {reason}"), reply
    assert (await fwp.http.get("/v1/info")).json()["totals"] == before
    held = await held_job(fwp)
    assert (held["state"], held["wid"]) == ("active", "nul-w")
    assert str(await conn.cmd("ACK", {"jid": "heldjob-1"})) == "+OK"  # still serving
    await conn.close()


# Times the old FWP reader took (Python's ISO 8601 reading, blanks stripped) but the job model
# both paths share refuses: not RFC 3339.
NOT_RFC3339 = ["20300102T030405Z", "2030-01-02T03:04:05+05", " 2030-01-02T03:04:05Z "]


@pytest.mark.parametrize("at", NOT_RFC3339)
async def test_a_time_http_refuses_is_refused_over_fwp(
    fwp: Any, database_url: str, at: str
) -> None:
    r = await fwp.http.post("/v1/jobs", json={"jid": "http-time-1", "jobtype": "t", "at": at})
    assert r.status_code == 422 and r.json()["code"] == "invalid_request", r.text
    conn = await Fwp.connect(fwp.port)
    reply = await conn.cmd("PUSH", job("fwp-time-1", at=at))
    assert reply.kind == "-" and "invalid at" in str(reply), reply
    rejected = (await conn.cmd("PUSHB", [job("fwp-time-2"), job("fwp-time-3", at=at)])).json
    assert list(rejected) == ["fwp-time-3"] and "invalid at" in rejected["fwp-time-3"]
    assert await count_jobs(database_url) == 1  # fwp-time-2 alone
    await conn.close()


@pytest.mark.parametrize("queue", [".", ".."])
async def test_a_queue_no_url_path_can_name_is_refused(
    fwp: Any, database_url: str, queue: str
) -> None:
    """ "." and ".." are dot segments in /v1/queues/{queue}/...: PUSH and FETCH refuse them as
    HTTP does, storing nothing and leaving the connection serving."""
    conn = await Fwp.connect(fwp.port, wid="dots-w")
    reply = await conn.cmd("PUSH", job("dot-queue-1", queue=queue))
    assert reply.kind == "-" and f"invalid queue {queue!r}" in str(reply), reply
    assert "not . or .." in str(reply), reply
    rejected = (await conn.cmd("PUSHB", [job("dot-queue-2"), job("dot-queue-3", queue=queue)])).json
    assert list(rejected) == ["dot-queue-3"] and "invalid queue" in rejected["dot-queue-3"]
    reply = await conn.call(f"FETCH default {queue}")
    assert reply.kind == "-" and f"invalid queue name {queue!r}" in str(reply), reply
    assert await count_jobs(database_url) == 1  # dot-queue-2 alone
    for i, name in enumerate([".a", "..a", "..."]):
        assert str(await conn.cmd("PUSH", job(f"near-dots-{i}", queue=name))) == "+OK"
        assert (await conn.call(f"FETCH {name}")).json["queue"] == name
    await conn.close()
