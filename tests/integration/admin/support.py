"""Arranging jobs in every state through the public API (no SQL shortcuts)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.conftest import InProcess

ADMIN_HEADERS: dict[str, str] = {}


async def push(api: InProcess, headers: dict[str, str] | None = None, **job: Any) -> str:
    body = {"jobtype": "Report", **job}
    r = await api.http.post("/v1/jobs", json=body, headers=headers or {})
    assert r.status_code == 201, r.text
    jid: str = r.json()["jid"]
    return jid


async def fetch_one(api: InProcess, queue: str = "default", wid: str = "w1") -> dict[str, Any]:
    r = await api.http.post("/v1/fetch", json={"queues": [queue], "wid": wid, "count": 1})
    assert r.status_code == 200, r.text
    (job,) = r.json()["jobs"]
    result: dict[str, Any] = job
    return result


async def fail(api: InProcess, job: dict[str, Any], **report: Any) -> dict[str, Any]:
    body = {"lease": job["lease"], "errtype": "Boom", "message": "it broke", **report}
    r = await api.http.post(f"/v1/jobs/{job['jid']}/fail", json=body)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


async def dead_job(api: InProcess, queue: str = "default", **job: Any) -> str:
    jid = await push(api, queue=queue, retry=-1, **job)
    fetched = await fetch_one(api, queue)
    assert fetched["jid"] == jid
    assert (await fail(api, fetched, message=f"dead {jid}"))["state"] == "dead"
    return jid


async def retrying_job(api: InProcess, queue: str = "default", **job: Any) -> str:
    jid = await push(api, queue=queue, retry=5, **job)
    fetched = await fetch_one(api, queue)
    assert fetched["jid"] == jid
    assert (await fail(api, fetched, errtype="Timeout", message="upstream slow"))[
        "state"
    ] == "scheduled"
    return jid


async def scheduled_job(api: InProcess, queue: str = "default", **job: Any) -> str:
    at = api.clock.now() + timedelta(hours=1)
    return await push(api, queue=queue, at=at.isoformat(), **job)


async def state_of(api: InProcess, jid: str) -> str | None:
    r = await api.http.get(f"/v1/jobs/{jid}")
    if r.status_code == 404:
        return None
    state: str = r.json()["state"]
    return state
