"""A long-polling fetch whose client disconnects (timed out, killed) stops waiting at once, and
nothing is reserved for it: otherwise the next job pushed would be leased to nobody and wait out
its whole reservation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.helpers import sql

GHOST = {"queues": ["default"], "wid": "ghost", "count": 5, "wait": 20}


async def _chunked(body: bytes) -> AsyncIterator[bytes]:
    yield body


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_a_fetch_whose_client_left_gets_nothing_reserved(werk_server, database_url, framing):
    body = json.dumps(GHOST).encode()
    content = _chunked(body) if framing == "chunked" else body
    async with httpx.AsyncClient(base_url=werk_server.url, timeout=0.5) as gone:
        with pytest.raises(httpx.ReadTimeout):
            await gone.post(
                "/v1/fetch", content=content, headers={"content-type": "application/json"}
            )
    await asyncio.sleep(0.3)  # the server has seen the connection close
    async with httpx.AsyncClient(base_url=werk_server.url, timeout=10) as http:
        pushed = await http.post("/v1/jobs", json={"jobtype": "x", "jid": "after-ghost-1"})
        assert pushed.status_code == 201
        assert pushed.json()["state"] == "available"
        (row,) = await sql(database_url, "SELECT state, wid, attempt FROM werk_jobs")
        assert (row["state"], row["wid"], row["attempt"]) == ("available", None, 0)
        r = await http.post("/v1/fetch", json={**GHOST, "wid": "alive", "wait": 0})
        assert [(j["jid"], j["wid"]) for j in r.json()["jobs"]] == [("after-ghost-1", "alive")]


async def test_jobs_reserved_for_a_client_that_left_are_handed_back(api, database_url):
    """The fetch had already reserved jobs when its client was found gone: they are available
    again in their old place, as if never fetched."""
    jobs = [{"jobtype": "x", "jid": f"undelivered-{i}", "priority": i} for i in range(3)]
    await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    gone = asyncio.get_running_loop().create_future()
    gone.set_result(None)
    assert await api.services.claim.fetch(["default"], "ghost", 2, 5.0, gone) == []
    rows = await sql(
        database_url, "SELECT jid, state, attempt, lease, wid FROM werk_jobs ORDER BY jid"
    )
    assert [(r["state"], r["attempt"], r["lease"], r["wid"]) for r in rows] == [
        ("available", 0, None, None)
    ] * 3
    r = await api.http.post(
        "/v1/fetch", json={"queues": ["default"], "wid": "alive", "count": 3, "wait": 0}
    )
    fetched = r.json()["jobs"]
    assert [j["jid"] for j in fetched] == ["undelivered-2", "undelivered-1", "undelivered-0"]
    assert {j["attempt"] for j in fetched} == {1}
