"""Exactly-once completion, proved with real processes: workers that insert a job's side effect
and ack the job in one transaction (werk_client.transactional_ack over psycopg, as an
application role that holds werk_app and may insert into its own table only) are killed with
SIGKILL at random points over 10,000 jobs. Every job's effect is there exactly once, and no job
is acked without its effect."""

from __future__ import annotations

import asyncio
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx

from tests.e2e.faults.harness import FAST_SERVER, fast_forward_retries
from tests.support.database import as_user
from tests.support.helpers import sql

JOBS = 10_000
WORKERS = 4
WORKER = Path(__file__).with_name("transactional_worker.py")


def spawn(url: str, dsn: str, log: Path) -> subprocess.Popen[bytes]:
    wid = f"tx-{secrets.token_hex(4)}"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, str(WORKER), "--url", url, "--dsn", dsn, "--wid", wid],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def test_effects_exactly_once_with_workers_killed_at_random(
    werk_server_factory, database_url, tmp_path
):
    server = werk_server_factory(env={**FAST_SERVER, "WERK_MAX_ORPHANS": "0"})
    role = f"werk_test_app_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f"CREATE ROLE {role} LOGIN IN ROLE werk_app")
    await admin.execute("CREATE TABLE effects (id bigserial PRIMARY KEY, jid text, wid text)")
    await admin.execute(f"GRANT INSERT ON effects TO {role}")
    await admin.execute(f"GRANT USAGE ON SEQUENCE effects_id_seq TO {role}")
    dsn = as_user(database_url, role)
    workers: list[subprocess.Popen[bytes]] = []
    rng = random.Random()
    # The points to kill at, as jobs done: random, and tied to progress rather than to the
    # clock, so that a fast run is killed as often as a slow one.
    marks = sorted(rng.sample(range(JOBS // 50, JOBS - JOBS // 20), 30))
    kills = 0
    try:
        jids = [f"effect-{i:06d}" for i in range(JOBS)]
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            for start in range(0, JOBS, 1000):
                chunk = [{"jobtype": "apply", "jid": j} for j in jids[start : start + 1000]]
                r = await http.post("/v1/jobs/batch", json={"jobs": chunk})
                assert r.status_code in (200, 201), r.text
        log = tmp_path / "workers.log"
        workers = [spawn(server.url, dsn, log) for _ in range(WORKERS)]
        deadline = time.monotonic() + 600
        left = JOBS
        while left:
            assert time.monotonic() < deadline, f"{left} jobs left"
            await asyncio.sleep(rng.uniform(0.01, 0.05))
            if kills < len(marks) and JOBS - left >= marks[kills]:
                victim = rng.randrange(len(workers))
                workers[victim].send_signal(signal.SIGKILL)
                workers[victim].wait()
                kills += 1
                workers[victim] = spawn(server.url, dsn, log)
            for i, w in enumerate(workers):
                assert w.poll() is None or w.returncode == -signal.SIGKILL, log.read_text()[-3000:]
                if w.poll() is not None:
                    workers[i] = spawn(server.url, dsn, log)
            # Jobs of killed workers come back as retries after WERK_WORKER_TIMEOUT; their
            # backoff is skipped (the test is about effects, not retry timing).
            await fast_forward_retries(database_url)
            left = await admin.fetchval("SELECT count(*) FROM werk_jobs")
    finally:
        for w in workers:
            w.send_signal(signal.SIGKILL)
            w.wait()
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
        )
        await admin.close()
        await sql(database_url, f"DROP OWNED BY {role}")
        await sql(database_url, f"DROP ROLE {role}")
    effects = await sql(database_url, "SELECT jid, count(*) AS n FROM effects GROUP BY jid")
    assert sorted(r["jid"] for r in effects) == jids  # each job's effect, and no other
    assert [r["jid"] for r in effects if r["n"] != 1] == []  # each exactly once
    # No job acked without its effect: every job was acked (none is left), each with its row.
    (counted,) = await sql(
        database_url,
        "SELECT sum(processed)::int AS processed, sum(failed)::int AS failed FROM werk_counters",
    )
    assert kills >= 20
    # Workers died holding leases: their jobs failed (WorkerLost) and ran again elsewhere.
    assert counted["failed"] > 0
    assert counted["processed"] == JOBS + counted["failed"]
