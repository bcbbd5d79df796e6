"""PostgreSQL CPU per job of the server's push, claim and ack statements on two schemas.

    python -m bench.schema_variants --upto 6 CHANGE.sql [--rounds 40]

Database A holds the migrations up to ``--upto``; database B the same, then CHANGE.sql (a
migration under test, or one already shipped, to measure what it did). Each round pushes,
claims and acks ``--statements`` times 1,000 jobs on A and on B (the order swapped every round),
reading each backend's CPU time from /proc/<pid>/schedstat around each statement. Both backends
are pinned to core 1 and this process to core 0. On a VM whose speed drifts within minutes only
rounds next to each other compare, so besides each side's median it prints the median of the
per-round ratios B / A. Drops and recreates the databases ``werk_schema_a`` and ``werk_schema_b``
on --dsn's server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
from itertools import count
from pathlib import Path

import asyncpg

from bench.target import fresh_database
from werk.db.migrate import available_migrations
from werk.db.pool import connect
from werk.db.queries import new_leases, push_jobs
from werk.db.sql import sql
from werk.domain.job import NewJob

PER_STATEMENT = 1000
STEPS = ("push", "claim", "ack")


def _cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _pin(pid: int, core: int) -> None:
    subprocess.run(["taskset", "-p", "-c", str(core), str(pid)], check=False, capture_output=True)


class Side:
    def __init__(self, conn: asyncpg.Connection, backend: int) -> None:
        self.conn = conn
        self.backend = backend
        self.us_per_job: dict[str, list[float]] = {step: [] for step in STEPS}

    @classmethod
    async def create(cls, dsn: str, name: str, upto: int, change: str | None) -> Side:
        conn = await connect(await fresh_database(dsn, name))
        for version, _, text in available_migrations():
            if version <= upto:
                await conn.execute(text)
        if change is not None:
            await conn.execute(change)
        await conn.execute("SET plan_cache_mode = force_generic_plan")  # as the server's pool
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        _pin(backend, 1)
        return cls(conn, backend)

    async def round(self, statements: int, jids: count[int]) -> None:
        spent = dict.fromkeys(STEPS, 0)
        claim = await self.conn.prepare(sql("job_fetch"))
        ack = await self.conn.prepare(sql("job_ack"))
        wids = ["bench"] * PER_STATEMENT
        for _ in range(statements):
            jobs = [
                NewJob(f"schema-{next(jids):012d}", "noop", "q", "[]", 0, 1800, 25, 0, "{}", None)
                for _ in range(PER_STATEMENT)
            ]
            t0 = _cpu_ns(self.backend)
            await push_jobs(self.conn, None, jobs, None, answer="decided")
            t1 = _cpu_ns(self.backend)
            rows = await claim.fetch(None, ["q"], wids, new_leases(PER_STATEMENT))
            t2 = _cpu_ns(self.backend)
            done = await ack.fetchval(None, {r["jid"]: r["lease"] for r in rows}, False, 0, {}, {})
            t3 = _cpu_ns(self.backend)
            if len(done) != PER_STATEMENT:
                raise RuntimeError(f"acked {len(done)} of {PER_STATEMENT}")
            for step, ns in zip(STEPS, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                spent[step] += ns
        for step in STEPS:
            self.us_per_job[step].append(spent[step] / 1000 / (statements * PER_STATEMENT))
        await self.conn.execute("VACUUM werk_jobs")


async def compare(dsn: str, upto: int, change: str, rounds: int, statements: int) -> None:
    _pin(os.getpid(), 0)
    a = await Side.create(dsn, "werk_schema_a", upto, None)
    b = await Side.create(dsn, "werk_schema_b", upto, change)
    jids = count()
    try:
        for r in range(rounds):
            for side in (a, b) if r % 2 == 0 else (b, a):
                await side.round(statements, jids)
    finally:
        await a.conn.close()
        await b.conn.close()
    for step in STEPS:
        ratios = [y / x for x, y in zip(a.us_per_job[step], b.us_per_job[step], strict=True)]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(
            f"{step:6s} A median {statistics.median(a.us_per_job[step]):6.2f}  "
            f"B median {statistics.median(b.us_per_job[step]):6.2f} us of PostgreSQL CPU per job;"
            f"  B / A per round: median {statistics.median(ratios):.3f} "
            f"(quartiles {q1:.3f}-{q3:.3f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.schema_variants")
    parser.add_argument("change", type=Path)
    parser.add_argument("--upto", type=int, required=True, help="the migrations both start from")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--statements", type=int, default=5)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/")
    args = parser.parse_args()
    asyncio.run(compare(args.dsn, args.upto, args.change.read_text(), args.rounds, args.statements))


if __name__ == "__main__":
    main()
