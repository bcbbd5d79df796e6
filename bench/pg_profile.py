"""Where PostgreSQL's CPU goes in the server's claim and ack statements: a ``perf`` profile.

    python -m bench.pg_profile [--jobs 100000] [--out perf.data]

Creates the database ``werk_pg_profile`` on --dsn's server (dropped first), migrated and holding
``--jobs`` available jobs, then claims 1,000 (job_fetch.sql) and acks them (job_ack.sql) on one
connection until none is left, while ``perf record -g`` samples that connection's backend.
Prints the share of the samples under the executor steps a claim and an ack are made of
(inclusive: a sample under two of them counts for both) and the leaf functions that take the
most. Needs ``perf`` and root (or perf_event_paranoid <= 1); PostgreSQL's exported symbols
are enough, no debug symbols.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import signal
import subprocess
import time
from pathlib import Path

from bench.target import claim_database
from werk.db.queries import ack_sql, new_leases
from werk.db.sql import sql

DATABASE = "werk_pg_profile"
PER_STATEMENT = 1000
# Executor steps, by the (exported) function that runs them.
STEPS = {
    "ExecInsertIndexTuples": "index entries of the claimed row's new version",
    "heap_update": "the claimed row's new version",
    "heap_lock_tuple": "row locks (FOR UPDATE SKIP LOCKED)",
    "index_getnext_slot": "index scans (claim order, jid lookups)",
    "ExecConstraints": "check constraints",
    "ExecMakeTableFunctionResult": "unnest / json_array_elements (the statements' lists)",
    "heap_delete": "the ack's delete",
    "OutputFunctionCall": "text output of the claimed rows",
    "SendFunctionCall": "binary output of the claimed rows",
    "CommitTransactionCommand": "commit (WAL flush included)",
    "XLogInsert": "WAL records",
}


async def _run(dsn: str, jobs: int, out: Path) -> float:
    conn = await claim_database(dsn, DATABASE, jobs)
    try:
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        claim = await conn.prepare(sql("job_fetch"))
        ack = await conn.prepare(ack_sql(keeping=False))
        wids = ["bench"] * PER_STATEMENT
        perf = subprocess.Popen(
            ["perf", "record", "-F", "2000", "-g", "-p", str(backend), "-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)  # perf attaches
        started, done = time.perf_counter(), 0
        while rows := await claim.fetch(None, ["q"], wids, new_leases(PER_STATEMENT)):
            leases = {r["jid"]: r["lease"] for r in rows}
            done += len(await ack.fetchval(None, leases, False, 0, {}))
        rate = done / (time.perf_counter() - started)
        perf.send_signal(signal.SIGINT)
        perf.wait()
        return rate
    finally:
        await conn.close()


def _stacks(data: Path) -> list[list[str]]:
    """Each sample's stack, innermost function first."""
    text = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "ip,sym"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    samples: list[list[str]] = []
    frames: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip():
            frames.append(line.split(None, 1)[-1].strip())
        elif frames:
            samples.append(frames)
            frames = []
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pg_profile")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=Path("perf.data"))
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/")
    args = parser.parse_args()
    rate = asyncio.run(_run(args.dsn, args.jobs, args.out))
    samples = _stacks(args.out)
    total = max(len(samples), 1)
    print(f"# claim {PER_STATEMENT:,} + ack on one connection: {rate:,.0f} jobs/s, {total} samples")
    print("## inclusive share of the backend's samples")
    for function, what in STEPS.items():
        share = sum(function in s for s in samples) / total
        print(f"{100 * share:5.1f}%  {function:28s} {what}")
    print("## leaf functions")
    leaves = collections.Counter(s[0] for s in samples)
    for function, n in leaves.most_common(15):
        print(f"{100 * n / total:5.1f}%  {function}")


if __name__ == "__main__":
    main()
