"""Cross-node wake-ups cost a NOTIFY per push only while another Werk process listens: a lone
server sends none, a server that starts is heard at once (its announcement), and one that
leaves is noticed at the next count."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import asyncpg
import httpx

from werk.db.listener import CHANNEL
from werk.services.wakeup import WakeHub

FETCH = {"queues": ["default"], "wid": "w1", "count": 1}


@contextlib.asynccontextmanager
async def heard(database_url: str) -> AsyncIterator[list[str]]:
    """Every payload sent on the channel while open (this session is not a Werk listener, so
    the servers do not count it)."""
    payloads: list[str] = []
    conn = await asyncpg.connect(database_url)
    await conn.add_listener(CHANNEL, lambda _c, _p, _ch, payload: payloads.append(payload))
    try:
        yield payloads
    finally:
        await conn.close()


def wakeups(payloads: list[str]) -> list[str]:
    return [p for p in payloads if not p.endswith("|")]


async def until(predicate, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def push(http: httpx.AsyncClient, url: str, jid: str) -> None:
    r = await http.post(url + "/v1/jobs", json={"jobtype": "x", "jid": jid})
    assert r.status_code == 201, r.text


async def test_a_lone_server_notifies_nobody_until_another_announces_itself(
    werk_server_factory, database_url
):
    async with heard(database_url) as payloads, httpx.AsyncClient(timeout=30) as http:
        # Both re-count listeners and re-check the database only every 30 s: within this test
        # only A's first count, B's announcement and A's NOTIFY can change anything.
        a = werk_server_factory(env={"WERK_POLL_INTERVAL": "30"})
        await until(lambda: len(payloads) == 1)  # A's announcement
        await asyncio.sleep(0.5)
        for i in range(5):
            await push(http, a.url, f"alone-job-{i}")
        await asyncio.sleep(0.5)
        assert wakeups(payloads) == []

        b = werk_server_factory(env={"WERK_POLL_INTERVAL": "30"})
        await until(lambda: len(payloads) == 2)  # B's announcement
        drained = await http.post(b.url + "/v1/fetch", json={**FETCH, "count": 5})
        assert len(drained.json()["jobs"]) == 5
        waiting = asyncio.create_task(http.post(b.url + "/v1/fetch", json={**FETCH, "wait": 20}))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        await push(http, a.url, "heard-job-1")
        r = await waiting
        assert [j["jid"] for j in r.json()["jobs"]] == ["heard-job-1"]
        assert time.monotonic() - started < 5
        assert len(wakeups(payloads)) == 1


async def test_a_server_goes_quiet_once_the_other_has_left(werk_server_factory, database_url):
    async with heard(database_url) as payloads, httpx.AsyncClient(timeout=30) as http:
        a = werk_server_factory(env={"WERK_POLL_INTERVAL": "1"})  # counts every second
        b = werk_server_factory()
        await until(lambda: len(payloads) == 2)  # both announcements
        await push(http, a.url, "both-job-1")
        await until(lambda: len(wakeups(payloads)) == 1)
        b.kill()
        deadline = time.monotonic() + 10
        quiet = 0
        while quiet < 3:
            assert time.monotonic() < deadline, "A kept notifying after B was gone"
            before = len(wakeups(payloads))
            await push(http, a.url, f"after-{time.monotonic_ns()}")
            await asyncio.sleep(0.3)
            quiet = quiet + 1 if len(wakeups(payloads)) == before else 0


@contextlib.asynccontextmanager
async def running_hub(count_peers) -> AsyncIterator[tuple[WakeHub, list[str]]]:
    """A hub whose notifications land in the yielded list; nothing else runs on a timer."""
    sent: list[str] = []

    async def send(payload: str) -> None:
        sent.append(payload)

    async def nothing(_queues: object) -> list[str]:
        return []

    hub = WakeHub(
        send_notify=send, queues_with_jobs=nothing, count_peers=count_peers, poll_interval=30
    )
    hub.start()
    try:
        yield hub, sent
    finally:
        await hub.close()


async def test_an_announcement_during_a_count_wins_over_its_answer():
    """A count that started before another process announced itself may not have seen it:
    its answer (no one) must not silence this process."""
    counting = asyncio.Event()
    answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def count_peers(_pid: int) -> int:
        counting.set()
        return await answer

    async with running_hub(count_peers) as (hub, sent):
        hub.listening(4242)
        await asyncio.wait_for(counting.wait(), 5)
        hub.on_notification("othernode|")
        answer.set_result(0)
        await asyncio.sleep(0.05)
        assert not hub.alone
        hub.jobs_arrived({"default": 1})
        await until(lambda: len(sent) == 1, 5)
        assert sent[0].endswith("|default:1")


async def test_a_lost_listen_connection_turns_notifications_back_on():
    async def nobody(_pid: int) -> int:
        return 0

    async with running_hub(nobody) as (hub, sent):
        assert not hub.alone  # nothing counted yet
        hub.listening(4242)
        await until(lambda: hub.alone, 5)
        hub.jobs_arrived({"default": 1})
        await asyncio.sleep(0.05)
        assert sent == []
        hub.listening(None)  # cannot hear announcements now
        assert not hub.alone
        hub.jobs_arrived({"default": 2})
        await until(lambda: len(sent) == 1, 5)
        assert sent[0].endswith("|default:2")


async def test_the_hub_closes_whenever_a_count_was_just_asked_for():
    """Closing right as a count is asked for (a LISTEN just came up) must still stop every loop;
    at each of several points of the event loop, so one lands between the request and the
    counting loop's wake-up."""

    async def nobody(_pid: int) -> int:
        return 0

    for turns in range(8):
        async with running_hub(nobody) as (hub, _sent):
            await asyncio.sleep(0.01)  # every loop waiting
            hub.listening(4242)
            for _ in range(turns):
                await asyncio.sleep(0)
            closing = asyncio.create_task(hub.close())
            done, _ = await asyncio.wait({closing}, timeout=2)
            if not done:
                closing.cancel()  # (also cancels the loop it waits for, so the test ends)
            assert done, f"close() still waiting after 2 s ({turns} turns after the request)"
