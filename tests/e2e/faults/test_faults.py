"""The fault suite: real server processes, real worker processes, real PostgreSQL; a fault is
injected and the ledger must show nothing lost (and every re-run accounted for)."""

from __future__ import annotations

import asyncio
import random
import time

import asyncpg
import httpx
import pytest

from tests.e2e.faults.harness import (
    FAST_SERVER,
    Fleet,
    fast_forward_retries,
    ledger_outcome,
    push_with_failover,
    read_ledger,
    settle,
)
from tests.support.database import RestartablePostgres
from tests.support.helpers import sql
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow


def jobs(prefix: str, n: int, jobtype: str = "sleep", args: list | None = None) -> list[dict]:
    # reserve_for at its minimum: a claim whose response is lost with a dying server or database
    # (committed, but the worker never saw it) comes back when the lease expires.
    return [
        {"jid": f"{prefix}-{i:05d}", "jobtype": jobtype, "args": args or [0.05], "reserve_for": 60}
        for i in range(n)
    ]


async def held_by(database_url: str, wid: str) -> int:
    rows = await sql(
        database_url, "SELECT count(*) AS n FROM werk_jobs WHERE state = 'active' AND wid = $1", wid
    )
    return rows[0]["n"]


async def test_kill_9_workers_mid_job(werk_server_factory, database_url, tmp_path):
    server = werk_server_factory(env=FAST_SERVER)
    ledger = tmp_path / "ledger"
    fleet = Fleet([server.url], ledger, concurrency=4)
    batch = jobs("k9", 1000, args=[0.2])
    try:
        for _ in range(4):
            fleet.spawn()
        await push_with_failover([server.url], batch)
        recoveries = []
        for _ in range(5):
            await asyncio.sleep(1.5)
            victim = random.choice(list(fleet.procs))
            held = await held_by(database_url, victim)
            fleet.kill9(victim)
            killed_at = time.monotonic()
            fleet.spawn()
            while await held_by(database_url, victim):
                assert time.monotonic() - killed_at < 10
                await asyncio.sleep(0.05)
            if held:
                recoveries.append(round(time.monotonic() - killed_at, 2))
        await settle(database_url, fleet, timeout=150)
    finally:
        fleet.stop()
    outcome = await ledger_outcome(
        "kill -9 workers",
        database_url,
        ledger,
        [j["jid"] for j in batch],
        recovery_seconds=recoveries,
        notes="worker_timeout=2s, maintenance every 0.25s; recovery = kill until its leases freed",
    )
    assert outcome.lost == 0 and outcome.dead == 0
    assert all(r <= 2 + 0.25 + 1.0 for r in recoveries), recoveries


async def test_kill_9_one_of_two_servers(werk_server_factory, database_url, tmp_path):
    a = werk_server_factory(env=FAST_SERVER)
    b = werk_server_factory(env=FAST_SERVER)
    ledger = tmp_path / "ledger"
    fleet = Fleet([a.url, b.url], ledger, concurrency=4)
    fleet_b = Fleet([b.url, a.url], ledger, concurrency=4)
    fleet_b._n = 100
    batch = jobs("srv", 1000, args=[0.01])
    try:
        for _ in range(2):
            fleet.spawn()
            fleet_b.spawn()
        producer = asyncio.create_task(push_with_failover([a.url, b.url], batch, batch=20))
        await asyncio.sleep(1.0)
        a.kill()
        killed_at = time.monotonic()
        await producer
        await settle(database_url, fleet, timeout=150)
        recovery = time.monotonic() - killed_at
    finally:
        fleet.stop()
        fleet_b.stop()
    outcome = await ledger_outcome(
        "kill -9 one of two servers",
        database_url,
        ledger,
        [j["jid"] for j in batch],
        recovery_seconds=[round(recovery, 2)],
        notes="recovery = kill until every job settled",
    )
    assert outcome.lost == 0 and outcome.dead == 0


async def test_postgres_restart_under_load(tmp_path):
    pg = RestartablePostgres()
    url = pg.start()
    server = ServerProcess(url, tmp_path, env=FAST_SERVER).start()
    ledger = tmp_path / "ledger"
    fleet = Fleet([server.url], ledger, concurrency=4)
    batch = jobs("pg", 600, args=[0.01])
    try:
        for _ in range(3):
            fleet.spawn()
        producer = asyncio.create_task(push_with_failover([server.url], batch, batch=10))
        await asyncio.sleep(1.0)
        pg.halt()
        await asyncio.sleep(2.0)
        pg.resume()
        resumed = time.monotonic()
        async with httpx.AsyncClient() as http:
            while (await http.get(server.url + "/readyz")).status_code != 200:
                await asyncio.sleep(0.05)
        recovery = time.monotonic() - resumed
        await producer
        await settle(url, fleet, timeout=150)
        assert server.process.poll() is None  # never restarted
        outcome = await ledger_outcome(
            "PostgreSQL restart",
            url,
            ledger,
            [j["jid"] for j in batch],
            recovery_seconds=[round(recovery, 2)],
            notes="database down 2 s; recovery = PostgreSQL back until /readyz 200",
        )
    finally:
        fleet.stop()
        server.stop()
        pg.stop()
    assert outcome.lost == 0 and outcome.dead == 0


async def test_poison_pill_goes_dead_and_the_queue_flows(
    werk_server_factory, database_url, tmp_path
):
    server = werk_server_factory(env={**FAST_SERVER, "WERK_MAX_ORPHANS": "3"})
    ledger = tmp_path / "ledger"
    # One job per worker process: a pill that kills its process takes nothing else with it.
    fleet = Fleet([server.url], ledger, concurrency=1)
    batch = [
        {"jid": "poison-pill-1", "jobtype": "poison", "reserve_for": 60},
        *jobs("ok", 100, args=[0.01]),
    ]
    try:
        for _ in range(3):
            fleet.spawn()
        await push_with_failover([server.url], batch)
        await settle(database_url, fleet, timeout=150)
    finally:
        fleet.stop()
    (row,) = await sql(database_url, "SELECT * FROM werk_jobs WHERE jid = 'poison-pill-1'")
    assert row["state"] == "dead" and row["orphans"] == 3
    assert "poison pill" in row["message"]
    outcome = await ledger_outcome(
        "poison pill",
        database_url,
        ledger,
        [j["jid"] for j in batch],
        notes=f"poison job dead after {row['orphans']} orphanings ({row['errtype']})",
    )
    assert outcome.dead == 1 and outcome.lost == 0 and outcome.completed == 100


async def test_extended_lease_is_never_handed_out_twice(
    werk_server_factory, database_url, tmp_path
):
    """reserve_for is at least 60 s, so this scenario runs a little over a minute."""
    server = werk_server_factory(env=FAST_SERVER)
    ledger = tmp_path / "ledger"
    fleet = Fleet([server.url], ledger, concurrency=1)
    batch = [
        {"jid": "long-extends", "jobtype": "long", "args": [75, 5], "reserve_for": 60},
        {"jid": "long-silent", "jobtype": "hang", "args": [75], "reserve_for": 60},
    ]
    try:
        for _ in range(3):
            fleet.spawn()
        await push_with_failover([server.url], batch)
        deadline = time.monotonic() + 120
        while await sql(database_url, "SELECT 1 FROM werk_jobs"):
            assert time.monotonic() < deadline, "not settled"
            await fast_forward_retries(database_url)
            await asyncio.sleep(0.5)
    finally:
        fleet.stop()
    # The ledger says which attempts ran to the end, and on which worker.
    deliveries: dict[str, list[tuple[str, int]]] = {"long-extends": [], "long-silent": []}
    for line in ledger.read_text().splitlines():
        jid, wid, attempt = line.split()
        deliveries[jid].append((wid, int(attempt)))
    assert [a for _, a in deliveries["long-extends"]] == [1]
    # The silent job's lease expired; a second worker ran attempt 2.
    assert sorted(a for _, a in deliveries["long-silent"]) == [1, 2]
    assert len({w for w, _ in deliveries["long-silent"]}) == 2
    await ledger_outcome(
        "lease extension",
        database_url,
        ledger,
        ["long-extends", "long-silent"],
        notes=f"extending job ran {deliveries['long-extends']}; silent job ran "
        f"{deliveries['long-silent']} (wid, attempt)",
    )


async def test_long_open_transaction_degrades_gracefully(
    werk_server_factory, database_url, tmp_path
):
    """A session idle in transaction for 60 s pins a snapshot, so vacuum cannot remove the rows
    deleted meanwhile. Jobs arrive at a steady rate; the completion rate per phase is reported."""
    server = werk_server_factory(env=FAST_SERVER)
    ledger = tmp_path / "ledger"
    fleet = Fleet([server.url], ledger, concurrency=8)
    rate, tick = 200, 0.1  # jobs per second, pushed every tick
    pushed: list[str] = []
    windows: list[tuple[str, float]] = []
    blocker = await asyncpg.connect(database_url)
    try:
        for _ in range(3):
            fleet.spawn()

        async def measure(phase: str, seconds: float) -> None:
            before = sum(read_ledger(ledger).values())
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                batch = jobs(f"txn{len(pushed)}", int(rate * tick), jobtype="noop", args=[0])
                await push_with_failover([server.url], batch)
                pushed.extend(j["jid"] for j in batch)
                await asyncio.sleep(tick)
            elapsed = time.monotonic() - started
            windows.append((phase, (sum(read_ledger(ledger).values()) - before) / elapsed))

        await measure("before", 10)
        tx = blocker.transaction(isolation="repeatable_read")
        await tx.start()
        await blocker.fetchval("SELECT count(*) FROM werk_jobs")  # pins a snapshot
        await measure("idle in transaction", 60)
        await tx.rollback()
        await measure("after", 10)
        await settle(database_url, fleet, timeout=150)
    finally:
        fleet.stop()
        await blocker.close()
    figures = ", ".join(f"{phase}: {r:.0f} jobs/s" for phase, r in windows)
    outcome = await ledger_outcome(
        "long-open transaction",
        database_url,
        ledger,
        pushed,
        notes=f"offered ~{rate} jobs/s; completed {figures}",
    )
    assert outcome.lost == 0
    assert all(r > 0 for _, r in windows), windows
