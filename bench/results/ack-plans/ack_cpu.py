"""PostgreSQL's CPU per acked job where the joined statement's plan is good: the joined ack
statement (job_ack.sql at 83531e0, as ack_plans.py reads it) against the current one, interleaved.

    PYTHONPATH=. .venv/bin/python bench/results/ack-plans/ack_cpu.py [--rounds 30]

One fresh database, statistics current. Each round, for each statement in turn (the order
alternating): 1,000 jobs pushed and claimed by the real statements, then acked; the backend's
CPU (/proc/PID/schedstat) across the ack alone, per job. Prints the median and quartiles.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from itertools import count
from pathlib import Path

from ack_plans import JOINED  # this script's folder is on sys.path

from bench.target import fresh_database
from werk.db.migrate import migrate
from werk.db.pool import connect
from werk.db.queries import NewJob, new_leases, push_jobs
from werk.db.sql import sql

JOBS = 1_000


def _cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


async def main(dsn: str, rounds: int) -> None:
    conn = await connect(await fresh_database(dsn, "werk_ack_cpu"))
    try:
        await migrate(conn)
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        claim = await conn.prepare(sql("job_fetch"))
        statements = {
            "joined": await conn.prepare(JOINED),
            "by key": await conn.prepare(sql("job_ack")),
        }
        spent: dict[str, list[float]] = {name: [] for name in statements}
        jids = count()
        for r in range(rounds):
            for name in sorted(statements, reverse=r % 2 == 1):
                jobs = [
                    NewJob(
                        f"ackcpu-{next(jids):09d}", "noop", "q", "[]", 0, 1800, 25, 0, "{}", None
                    )
                    for _ in range(JOBS)
                ]
                await push_jobs(conn, None, jobs, None, answer="decided")
                rows = await claim.fetch(None, ["q"], ["bench"] * JOBS, new_leases(JOBS))
                if name == "joined":
                    args = (
                        None,
                        [r["jid"] for r in rows],
                        [r["lease"] for r in rows],
                        False,
                        0,
                        [],
                    )
                else:
                    args = (None, {r["jid"]: r["lease"] for r in rows}, False, 0, {})
                before = _cpu_ns(backend)
                done = await statements[name].fetchval(*args)
                spent[name].append((_cpu_ns(backend) - before) / 1000 / JOBS)
                if len(done) != JOBS:
                    raise RuntimeError(f"{name} acked {len(done)} of {JOBS}")
            await conn.execute("VACUUM ANALYZE werk_jobs")
        for name, values in spent.items():
            q = statistics.quantiles(values, n=4)
            print(f"{name:<7} median {q[1]:.2f} us per acked job (quartiles {q[0]:.2f}-{q[2]:.2f})")
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(args.dsn, args.rounds))
