"""PostgreSQL CPU per claimed job of job_fetch.sql against variants of it, on one connection.

    python -m bench.claim_variants [VARIANT.sql ...] [--rounds 30] [--statements 5]

On a 2-core VM whose speed drifts by a quarter within minutes, two runs one after the other do
not compare; this interleaves them instead. A fresh database holds enough available jobs for
every round; each round runs every variant in turn (the order rotated), ``--statements`` claims
of 1,000 jobs each, and reads the backend's CPU time from /proc/<pid>/schedstat (nanoseconds)
around them. The backend is pinned to core 1 and this process to core 0. Between variants the
table is vacuumed (outside the measurement), so no variant walks the dead rows of another.

A variant is a file holding the whole statement with the same parameters as job_fetch.sql.
Prints the median and minimum per variant. Uses the database given by --dsn (default: the
machine's PostgreSQL on loopback) and drops and recreates the database ``werk_claim_variants``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
from pathlib import Path

from bench.target import REPO, claim_database
from werk.db.queries import new_leases

DATABASE = "werk_claim_variants"
PER_STATEMENT = 1000


def _cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _pin(pid: int, core: int) -> None:
    subprocess.run(["taskset", "-p", "-c", str(core), str(pid)], check=False, capture_output=True)


async def compare(dsn: str, variants: dict[str, str], rounds: int, statements: int) -> None:
    jobs = PER_STATEMENT * statements * rounds * len(variants) + PER_STATEMENT
    conn = await claim_database(dsn, DATABASE, jobs)
    try:
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        _pin(backend, 1)
        _pin(os.getpid(), 0)
        prepared = {name: await conn.prepare(text) for name, text in variants.items()}
        names = list(variants)
        per_job: dict[str, list[float]] = {name: [] for name in names}
        wids = ["bench"] * PER_STATEMENT
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                before, claimed = _cpu_ns(backend), 0
                for _ in range(statements):
                    leases = new_leases(PER_STATEMENT)
                    claimed += len(await prepared[name].fetch(None, ["q"], wids, leases))
                per_job[name].append((_cpu_ns(backend) - before) / 1000 / claimed)
                await conn.execute("VACUUM werk_jobs")
    finally:
        await conn.close()
    for name, values in per_job.items():
        print(
            f"{name:30s} median {statistics.median(values):6.2f}  min {min(values):6.2f} "
            "us of PostgreSQL CPU per claimed job"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.claim_variants")
    parser.add_argument("variants", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--statements", type=int, default=5)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/")
    args = parser.parse_args()
    shipped = REPO / "server" / "werk" / "db" / "sql" / "job_fetch.sql"
    variants = {"job_fetch.sql": shipped.read_text()}
    variants.update({str(p): p.read_text() for p in args.variants})
    asyncio.run(compare(args.dsn, variants, args.rounds, args.statements))


if __name__ == "__main__":
    main()
