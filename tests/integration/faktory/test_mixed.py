"""Jobs cross protocols: pushed over FWP and worked over HTTP, and the reverse."""

from __future__ import annotations

from tests.integration.faktory.fwp import Fwp, job


async def test_push_over_fwp_work_over_http(fwp):
    conn = await Fwp.connect(fwp.port)
    assert str(await conn.cmd("PUSH", job("mixed-f2h-1", "Mail", [1, "x"], queue="mixed"))) == (
        "+OK"
    )
    assert (await conn.cmd("PUSHB", [job("mixed-f2h-2", queue="mixed")])).text == "{}"
    r = await fwp.http.post("/v1/fetch", json={"queues": ["mixed"], "wid": "http-w", "count": 5})
    jobs = {j["jid"]: j for j in r.json()["jobs"]}
    assert set(jobs) == {"mixed-f2h-1", "mixed-f2h-2"}
    assert (jobs["mixed-f2h-1"]["jobtype"], jobs["mixed-f2h-1"]["args"]) == ("Mail", [1, "x"])
    r = await fwp.http.post(
        "/v1/jobs/mixed-f2h-1/ack", json={"lease": jobs["mixed-f2h-1"]["lease"]}
    )
    assert r.status_code == 204
    r = await fwp.http.post(
        "/v1/jobs/mixed-f2h-2/fail",
        json={"lease": jobs["mixed-f2h-2"]["lease"], "errtype": "HttpErr"},
    )
    assert r.status_code == 200
    # FWP sees the HTTP side's work.
    info = (await conn.call("INFO")).json["faktory"]
    assert (info["total_processed"], info["total_failures"]) == (2, 1)
    assert info["tasks"]["Retries"]["size"] == 1
    # An FWP ACK from a connection that did not reserve the job changes nothing.
    await conn.cmd("PUSH", job("mixed-f2h-3", queue="mixed"))
    r = await fwp.http.post("/v1/fetch", json={"queues": ["mixed"], "wid": "http-w"})
    assert str(await conn.cmd("ACK", {"jid": "mixed-f2h-3"})) == "+OK"
    assert (await fwp.http.get("/v1/jobs/mixed-f2h-3")).json()["state"] == "active"
    await conn.close()


async def test_push_over_http_work_over_fwp(fwp):
    r = await fwp.http.post(
        "/v1/jobs",
        json={"jid": "mixed-h2f-1", "jobtype": "Resize", "args": [{"w": 10}], "queue": "img"},
    )
    assert r.status_code == 201
    r = await fwp.http.post(
        "/v1/jobs", json={"jid": "mixed-h2f-2", "jobtype": "Resize", "queue": "img", "retry": 2}
    )
    assert r.status_code == 201
    conn = await Fwp.connect(fwp.port, wid="fwp-w")
    first = (await conn.call("FETCH img")).json
    assert (first["jid"], first["jobtype"], first["args"]) == ("mixed-h2f-1", "Resize", [{"w": 10}])
    assert str(await conn.cmd("ACK", {"jid": "mixed-h2f-1"})) == "+OK"
    assert (await fwp.http.get("/v1/jobs/mixed-h2f-1")).status_code == 404
    second = (await conn.call("FETCH img")).json
    assert second["jid"] == "mixed-h2f-2"
    # HTTP shows the FWP reservation, under the FWP worker's wid.
    j = (await fwp.http.get("/v1/jobs/mixed-h2f-2")).json()
    assert (j["state"], j["wid"]) == ("active", "fwp-w")
    fail = {
        "jid": "mixed-h2f-2",
        "errtype": "IOError",
        "message": "disk full",
        "backtrace": ["a.py:1", "b.py:2"],
    }
    assert str(await conn.cmd("FAIL", fail)) == "+OK"
    j = (await fwp.http.get("/v1/jobs/mixed-h2f-2")).json()
    assert j["state"] == "scheduled"
    assert (j["failure"]["errtype"], j["failure"]["message"], j["failure"]["backtrace"]) == (
        "IOError",
        "disk full",
        ["a.py:1", "b.py:2"],
    )
    assert (j["failure"]["retry_count"], j["failure"]["remaining"]) == (1, 1)
    await conn.close()
