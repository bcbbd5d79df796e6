"""Several `werk serve` processes behind one PgBouncer in transaction pooling mode, whose three
server connections are shared by far more clients (each server's two pools): pushes, fetches,
acks and long polls stay correct, and a long poll on one node is woken by a push on another
through the LISTEN each node keeps on a direct connection, or without one at the re-check."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
import httpx

from tests.e2e.pgbouncer.conftest import POOL_SIZE
from tests.e2e.test_notify_peers import heard
from tests.support.server import ServerProcess
from werk.db.listener import APPLICATION_NAME

WORKERS = 12
JOBS = 240


async def fetch(http: httpx.AsyncClient, server: ServerProcess, wid: str, **body: Any) -> Any:
    r = await http.post(
        server.url + "/v1/fetch", json={"queues": ["pooled"], "wid": wid, "count": 1, **body}
    )
    assert r.status_code == 200, r.text
    return r.json()["jobs"]


async def cross_node_wakeups(
    http: httpx.AsyncClient, pusher: ServerProcess, waiting_on: Sequence[ServerProcess]
) -> float:
    """WORKERS long polls wait on ``waiting_on``; as many jobs are pushed, one by one, on
    ``pusher``. Every poll gets one of them; returns the seconds from the first push to the
    last answer."""
    nodes = itertools.cycle(waiting_on)
    polls = [
        asyncio.create_task(fetch(http, next(nodes), f"waiter-{i}", wait=25))
        for i in range(WORKERS)
    ]
    try:
        return await _answered(http, pusher, polls)
    finally:
        for poll in polls:
            poll.cancel()


async def _answered(
    http: httpx.AsyncClient, pusher: ServerProcess, polls: list[asyncio.Task[Any]]
) -> float:
    await asyncio.sleep(1)
    assert not any(p.done() for p in polls)
    started = time.monotonic()
    for i in range(WORKERS):
        r = await http.post(
            pusher.url + "/v1/jobs",
            json={"jobtype": "t", "jid": f"woken-job-{i}", "queue": "pooled"},
        )
        assert r.status_code == 201, r.text
    answers = await asyncio.gather(*polls)
    elapsed = time.monotonic() - started
    assert sorted(job["jid"] for jobs in answers for job in jobs) == sorted(
        f"woken-job-{i}" for i in range(WORKERS)
    )
    for jobs in answers:
        (job,) = jobs
        r = await http.post(f"{pusher.url}/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
        assert r.status_code == 204, r.text
    return elapsed


async def push_and_work(http: httpx.AsyncClient, servers: Sequence[ServerProcess]) -> None:
    """JOBS jobs pushed in batches on every node while WORKERS workers fetch (long polls) and ack
    them on every node: each job is handed out once and acked once."""
    acked: list[str] = []
    pushed = [f"work-job-{i}" for i in range(JOBS)]

    async def producer(n: int) -> None:
        mine = pushed[n :: len(servers)]
        for start in range(0, len(mine), 20):
            jobs = [
                {"jobtype": "t", "jid": jid, "queue": "pooled"} for jid in mine[start : start + 20]
            ]
            r = await http.post(servers[n].url + "/v1/jobs/batch", json={"jobs": jobs})
            assert r.status_code in (200, 201), r.text

    async def worker(n: int) -> None:
        server = servers[n % len(servers)]
        while len(acked) < JOBS:
            for job in await fetch(http, server, f"worker-{n}", count=5, wait=1):
                r = await http.post(
                    f"{server.url}/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]}
                )
                assert r.status_code == 204, r.text
                acked.append(job["jid"])

    async with asyncio.timeout(120):
        await asyncio.gather(
            *(producer(n) for n in range(len(servers))), *(worker(n) for n in range(WORKERS))
        )
    assert sorted(acked) == sorted(pushed)


async def database_state(database_url: str) -> dict[str, int]:
    """Jobs left, server sessions besides the LISTEN ones and this one, advisory locks held."""
    conn = await asyncpg.connect(database_url)
    try:
        return {
            "jobs": await conn.fetchval("SELECT count(*) FROM werk_jobs"),
            "sessions": await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
                "AND application_name <> $1",
                APPLICATION_NAME,
            ),
            "listening": await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = $1",
                APPLICATION_NAME,
            ),
            "advisory_locks": await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            ),
        }
    finally:
        await conn.close()


async def test_nodes_behind_pgbouncer_with_direct_listen(
    pooled_server_factory: Callable[..., ServerProcess], database_url: str
) -> None:
    # Re-checks every 30 s: only a notification heard on a direct connection wakes in time.
    servers = [pooled_server_factory(env={"WERK_POLL_INTERVAL": "30"}) for _ in range(3)]
    async with httpx.AsyncClient(timeout=60) as http:
        await asyncio.sleep(1)  # the last one's announcement reaches the others
        elapsed = await cross_node_wakeups(http, servers[0], servers[1:])
        assert elapsed < 3, elapsed
        await push_and_work(http, servers)
    state = await database_state(database_url)
    assert state["jobs"] == 0
    assert state["listening"] == 3
    # Every statement of the three servers ran on PgBouncer's few connections; none kept an
    # advisory lock behind (the vacuum's, taken through a pooler, would stay held).
    assert 1 <= state["sessions"] <= POOL_SIZE, state
    assert state["advisory_locks"] == 0, state


async def test_nodes_behind_pgbouncer_without_a_direct_connection_poll(
    pooled_server_factory: Callable[..., ServerProcess], database_url: str
) -> None:
    async with heard(database_url) as payloads, httpx.AsyncClient(timeout=60) as http:
        servers = [
            pooled_server_factory(direct=False, env={"WERK_POLL_INTERVAL": "0.5"}) for _ in range(2)
        ]
        await asyncio.sleep(1)  # each has counted the listening nodes: none
        elapsed = await cross_node_wakeups(http, servers[0], servers[1:])
        assert elapsed < 3, elapsed  # the re-check, every 0.5 s, found the jobs
        await push_and_work(http, servers)
        # Nobody listens, so no node spent a NOTIFY on its pushes.
        assert payloads == []
    state = await database_state(database_url)
    assert state["jobs"] == 0
    assert state["listening"] == 0
    assert 1 <= state["sessions"] <= POOL_SIZE, state
    assert state["advisory_locks"] == 0, state
