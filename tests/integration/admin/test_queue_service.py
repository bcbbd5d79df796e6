"""QueueService: pause/resume/clear/list, as the admin API and the Faktory layer use it."""

from __future__ import annotations

import pytest

from tests.conftest import InProcess
from werk.errors import InvalidRequest


async def push(api: InProcess, queue: str, n: int = 1) -> None:
    for _ in range(n):
        r = await api.http.post("/v1/jobs", json={"jobtype": "t", "queue": queue})
        assert r.status_code == 201


async def test_list_sizes_latency_counts(api: InProcess) -> None:
    await push(api, "a", 3)
    api.clock.advance(10)
    await push(api, "b", 1)
    queues = {q.name: q for q in await api.services.queues.list()}
    assert queues["a"].size == 3 and queues["b"].size == 1
    assert queues["a"].latency_seconds == pytest.approx(10)
    assert queues["b"].latency_seconds == pytest.approx(0)
    assert queues["a"].counts == {"available": 3}
    assert not queues["a"].paused


async def test_paused_queue_hands_out_nothing_but_accepts_pushes(api: InProcess) -> None:
    await push(api, "p", 1)
    row = await api.services.queues.pause("p")
    assert row.paused
    await push(api, "p", 1)
    fetched = await api.http.post("/v1/fetch", json={"queues": ["p"], "wid": "w1", "count": 5})
    assert fetched.json()["jobs"] == []
    row = await api.services.queues.resume("p")
    assert not row.paused and row.size == 2
    fetched = await api.http.post("/v1/fetch", json={"queues": ["p"], "wid": "w1", "count": 5})
    assert len(fetched.json()["jobs"]) == 2


async def test_pause_ahead_of_time_and_unknown_queue(api: InProcess) -> None:
    assert (await api.services.queues.pause("later")).paused
    assert [q.name for q in await api.services.queues.list()] == ["later"]
    empty = await api.services.queues.get("never")
    assert empty.size == 0 and not empty.paused
    assert await api.services.queues.latency("never") == 0
    with pytest.raises(InvalidRequest):
        await api.services.queues.pause("bad name!")


async def test_clear_deletes_only_available(api: InProcess) -> None:
    await push(api, "c", 3)
    r = await api.http.post("/v1/fetch", json={"queues": ["c"], "wid": "w1", "count": 1})
    assert len(r.json()["jobs"]) == 1
    assert await api.services.queues.clear("c") == 2
    row = await api.services.queues.get("c")
    assert row.size == 0 and row.counts == {"active": 1}
