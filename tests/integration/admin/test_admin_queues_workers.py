"""Admin API for queues (list, pause, resume, clear) and workers (list, quiet, terminate)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import InProcess
from tests.integration.admin.support import fetch_one, push


async def test_queue_list_and_get(api: InProcess) -> None:
    await push(api, queue="mail")
    api.clock.advance(30)
    await push(api, queue="mail")
    await fetch_one(api, "mail")
    r = await api.http.get("/v1/queues")
    assert r.status_code == 200
    (mail,) = r.json()["queues"]
    assert mail["name"] == "mail"
    assert mail["size"] == 1
    assert mail["paused"] is False
    assert mail["counts"] == {"available": 1, "active": 1}
    assert mail["latency_seconds"] == 0  # the oldest waiting job was pushed just now
    r = await api.http.get("/v1/queues/nobody")
    assert r.json() == {
        "name": "nobody", "size": 0, "latency_seconds": 0, "paused": False, "counts": {}
    }  # fmt: skip


async def test_pause_resume_over_http(api: InProcess) -> None:
    await push(api, queue="q")
    r = await api.http.post("/v1/queues/q/pause")
    assert r.status_code == 200 and r.json()["paused"] is True
    await push(api, queue="q")  # still accepted
    r = await api.http.post("/v1/fetch", json={"queues": ["q"], "wid": "w", "count": 10})
    assert r.json()["jobs"] == []
    r = await api.http.post("/v1/queues/q/resume")
    assert r.json()["paused"] is False and r.json()["size"] == 2
    r = await api.http.post("/v1/fetch", json={"queues": ["q"], "wid": "w", "count": 10})
    assert len(r.json()["jobs"]) == 2
    assert (await api.http.post("/v1/queues/bad%20name/pause")).status_code == 422


async def test_clear_queue_over_http(api: InProcess) -> None:
    for _ in range(3):
        await push(api, queue="q")
    await push(api, queue="other")
    r = await api.http.delete("/v1/queues/q/jobs")
    assert r.status_code == 200
    assert r.json() == {"queue": "q", "deleted": 3}
    sizes = {q["name"]: q["size"] for q in (await api.http.get("/v1/queues")).json()["queues"]}
    assert sizes == {"other": 1}


async def beat(api: InProcess, wid: str, **extra: Any) -> str:
    body = {"wid": wid, "hostname": "box", "pid": 42, "labels": ["py"], "rss_kb": 1000, **extra}
    r = await api.http.post("/v1/beat", json=body)
    assert r.status_code == 200, r.text
    state: str = r.json()["state"]
    return state


async def test_workers_list_shows_jobs_held(api: InProcess) -> None:
    await beat(api, "w1")
    await beat(api, "w2")
    await push(api)
    await fetch_one(api, wid="w1")
    r = await api.http.get("/v1/workers")
    assert r.status_code == 200
    workers = {w["wid"]: w for w in r.json()["workers"]}
    assert set(workers) == {"w1", "w2"}
    w1 = workers["w1"]
    assert (w1["hostname"], w1["pid"], w1["labels"], w1["rss_kb"]) == ("box", 42, ["py"], 1000)
    assert w1["state"] == "running" and w1["busy"] == 1 and workers["w2"]["busy"] == 0
    assert w1["last_beat_at"] is not None


async def test_quiet_then_terminate_one(api: InProcess) -> None:
    await beat(api, "w1")
    await beat(api, "w2")
    r = await api.http.post("/v1/workers/w1/quiet")
    assert r.json() == {"wid": "w1", "state": "quiet"}
    assert await beat(api, "w1") == "quiet"  # the next beat delivers it
    assert await beat(api, "w2") == "running"
    r = await api.http.post("/v1/workers/w1/terminate")
    assert r.json() == {"wid": "w1", "state": "terminate"}
    r = await api.http.post("/v1/workers/w1/quiet")  # states only move forward
    assert r.json() == {"wid": "w1", "state": "terminate"}
    assert await beat(api, "w1") == "terminate"
    r = await api.http.post("/v1/workers/nobody/quiet")
    assert r.status_code == 404
    assert r.json()["code"] == "worker_not_found"


@pytest.mark.parametrize("wid", ["host/1234", "a/quiet", "quiet", "sp ace+%?#é"])
async def test_any_wid_a_beat_takes_can_be_signalled(api: InProcess, wid: str) -> None:
    await beat(api, wid)
    for signal in ("quiet", "terminate"):
        r = await api.http.post(f"/v1/workers/{quote(wid, safe='')}/{signal}")
        assert r.json() == {"wid": wid, "state": signal}, r.text
    assert await beat(api, wid) == "terminate"


async def test_quiet_and_terminate_all(api: InProcess) -> None:
    for wid in ("a", "b", "c"):
        await beat(api, wid)
    await api.http.post("/v1/workers/c/terminate")
    r = await api.http.post("/v1/workers/quiet")
    assert r.json() == {"changed": 2}
    assert [await beat(api, w) for w in ("a", "b", "c")] == ["quiet", "quiet", "terminate"]
    r = await api.http.post("/v1/workers/terminate")
    assert r.json() == {"changed": 2}
    assert [await beat(api, w) for w in ("a", "b", "c")] == ["terminate"] * 3


async def test_quiet_racing_a_first_beat_is_never_lost(api: InProcess) -> None:
    """An operator's quiet sent while the worker's first beat is being recorded is either
    refused (404: the caller asks again) or delivered by the next beat, never answered as done
    and then lost."""
    answered = 0
    for i in range(150):
        wid = f"racer-{i}"
        _, r = await asyncio.gather(beat(api, wid), api.http.post(f"/v1/workers/{wid}/quiet"))
        if r.status_code == 200:
            answered += 1
            assert r.json() == {"wid": wid, "state": "quiet"}, r.json()
            assert await beat(api, wid) == "quiet", wid
        else:
            assert r.status_code == 404, r.text
    assert answered > 0
