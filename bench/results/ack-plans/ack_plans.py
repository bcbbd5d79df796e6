"""Time one ack of 1,000 jobs under statistics that mislead the planner, with the statement that
joined its ack list to werk_jobs (job_ack.sql at 83531e0, read from git) and with the current one.

    .venv/bin/python bench/results/ack-plans/ack_plans.py [--dsn postgresql://postgres@127.0.0.1/]

For each table size and state the database is set up anew (autovacuum off for the table):
"analyzed" takes statistics while every job waits, then claims a fraction; "emptied" and
"untruncated" take them, DELETE every job and VACUUM (truncating or not), then push a burst of
the same size and claim a fraction. Each statement then acks 1,000 of the claimed jobs, generic
and custom plan, in a transaction rolled back (both see the same state); the best of three.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from pathlib import Path

from bench.target import fresh_database
from werk.db.migrate import migrate
from werk.db.pool import connect
from werk.db.sql import sql

REPO = Path(__file__).resolve().parents[3]
# The statement before a560d00, which joined the ack list to werk_jobs.
JOINED = subprocess.run(
    ["git", "show", "83531e0:server/werk/db/sql/job_ack.sql"],
    cwd=REPO,
    check=True,
    capture_output=True,
    text=True,
).stdout
INSERT = """
    INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
    SELECT 'ackplan-' || g, 'noop', 'q', '[]', 'available', now(), now(), now()
    FROM generate_series(1, $1) AS g
"""
CLAIM = """
    UPDATE werk_jobs SET state = 'active', attempt = 1, lease = gen_random_uuid(),
                         lease_expires_at = now() + interval '30 minutes', wid = 'w'
    WHERE substr(jid, 9)::int % 12 < $1
"""
SIZES = (3_000, 10_000, 20_000)
STATES = {"analyzed": None, "emptied": "true", "untruncated": "false"}
TWELFTHS = (2, 9)
ACKED = 1_000


async def ack_ms(conn, statement: str, args: tuple, mode: str) -> float:
    best = float("inf")
    prepared = await conn.prepare(statement)
    for _ in range(3):
        transaction = conn.transaction()
        await transaction.start()
        try:
            await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
            started = time.perf_counter()
            await prepared.fetchval(*args)
            best = min(best, time.perf_counter() - started)
        finally:
            await transaction.rollback()
    return best * 1000


async def main(dsn: str) -> None:
    head = ("size", "state", "claimed", "acked", "plan", "joined ms", "by key ms")
    print("{:>6} {:<12} {:>7} {:>6} {:<7} {:>10} {:>10}".format(*head))
    for size in SIZES:
        for state, truncate in STATES.items():
            for twelfths in TWELFTHS:
                conn = await connect(await fresh_database(dsn, "werk_ack_plans"))
                try:
                    await migrate(conn)
                    await conn.execute("ALTER TABLE werk_jobs SET (autovacuum_enabled = false)")
                    await conn.execute(INSERT, size)
                    await conn.execute("ANALYZE werk_jobs")
                    if truncate is not None:
                        await conn.execute("DELETE FROM werk_jobs")
                        await conn.execute(f"VACUUM (TRUNCATE {truncate}) werk_jobs")
                        await conn.execute(INSERT, size)
                    await conn.execute(CLAIM, twelfths)
                    rows = await conn.fetch(
                        "SELECT jid, lease FROM werk_jobs WHERE lease IS NOT NULL LIMIT $1", ACKED
                    )
                    jids, leases = [r["jid"] for r in rows], [r["lease"] for r in rows]
                    joined = (None, jids, leases, False, 0, [])
                    by_key = (None, {r["jid"]: r["lease"] for r in rows}, False, 0, {})
                    for mode in ("force_generic_plan", "force_custom_plan"):
                        old = await ack_ms(conn, JOINED, joined, mode)
                        new = await ack_ms(conn, sql("job_ack"), by_key, mode)
                        print(
                            f"{size:>6} {state:<12} {f'{twelfths}/12':>7} {len(rows):>6} "
                            f"{mode.split('_')[1]:<7} "
                            f"{old:>10.1f} {new:>10.1f}",
                            flush=True,
                        )
                finally:
                    await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    asyncio.run(main(parser.parse_args().dsn))
