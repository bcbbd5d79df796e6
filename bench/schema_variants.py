"""PostgreSQL CPU per job of the server's push, claim, ack and fail statements, and of the
VACUUM after them, on two schemas.

    python -m bench.schema_variants [--upto N] CHANGE.sql [--rounds 40]
    python -m bench.schema_variants --change-sql "DROP INDEX werk_jobs_words_idx" \\
        --completed 1000000 --args-words --rounds 12

Database A holds the migrations up to ``--upto`` (default: all of them); database B the same,
then CHANGE.sql or ``--change-sql`` (a migration under test, a shipped one to measure what it
did, or a statement taking something out). With ``--completed N`` both first get N completed
jobs kept with their result (one INSERT ... SELECT generate_series each, then VACUUM ANALYZE),
so every statement and VACUUM runs beside a large table and its indexes.

Each round, on A and on B (the order swapped every round), ``--statements`` times: pushes 1,000
jobs, claims and acks them (deleted at ack); pushes 1,000 with keep_result_for, claims them and
acks them with a result (kept as completed: ``ack-kept``); pushes ``--fails`` more, claims them
and fails each (one statement per job, as the API does: a retry, so the job is kept). Then it
runs the server's VACUUM of the job table. It reads each backend's CPU time from
/proc/<pid>/schedstat around each statement, and the VACUUM's wall time too. Both backends are
pinned to core 1 and this process to core 0. On a VM whose speed drifts within minutes only
rounds next to each other compare, so besides each side's median it prints the median of the
per-round ratios B / A. ``--args-words`` pushes args holding words (an order id, a number, a
customer) instead of ``[]``, for changes that index them. Drops and recreates the databases
``werk_schema_a`` and ``werk_schema_b`` on --dsn's server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import time
from itertools import count
from pathlib import Path

import asyncpg

from bench.target import SEED_COMPLETED_SQL, fresh_database
from werk.db.migrate import available_migrations
from werk.db.pool import connect
from werk.db.queries import ack_jobs, fail_job, new_leases, push_jobs
from werk.db.sql import sql
from werk.domain.job import NewJob

PER_STATEMENT = 1000
STEPS = ("push", "claim", "ack", "ack-kept", "fail", "vacuum")


def _cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _pin(pid: int, core: int) -> None:
    subprocess.run(["taskset", "-p", "-c", str(core), str(pid)], check=False, capture_output=True)


def _args(n: int, words: bool) -> str:
    if not words:
        return "[]"
    return json.dumps([f"order-{n}", n, {"customer": f"c{n % 1000}", "note": "nightly export"}])


class Side:
    def __init__(self, name: str, conn: asyncpg.Connection, backend: int) -> None:
        self.name = name
        self.conn = conn
        self.backend = backend
        # per round: us of PostgreSQL CPU per job (per VACUUM for "vacuum")
        self.per_round: dict[str, list[float]] = {step: [] for step in STEPS}
        self.vacuum_ms: list[float] = []

    @classmethod
    async def create(
        cls, dsn: str, name: str, upto: int, change: str | None, completed: int
    ) -> Side:
        conn = await connect(await fresh_database(dsn, name))
        for version, _, text in available_migrations():
            if version <= upto:
                await conn.execute(text)
        if change is not None:
            await conn.execute(change)
        if completed:
            started = time.perf_counter()
            await conn.execute(SEED_COMPLETED_SQL, "kept-", "kept", completed)
            await conn.execute("VACUUM ANALYZE werk_jobs")
            size = await conn.fetchval("SELECT pg_size_pretty(pg_total_relation_size('werk_jobs'))")
            print(
                f"# {name}: {completed:,} completed jobs seeded in "
                f"{time.perf_counter() - started:.0f} s; werk_jobs with its indexes: {size}",
                flush=True,
            )
        await conn.execute("SET plan_cache_mode = force_generic_plan")  # as the server's pool
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        _pin(backend, 1)
        return cls(name, conn, backend)

    async def _push_claim(self, n: int, jids: count[int], words: bool, keep: int | None) -> dict:
        jobs = []
        for _ in range(n):
            k = next(jids)
            jobs.append(
                NewJob(
                    f"schema-{k:012d}", "noop", "q", _args(k, words), 0, 1800, 25, 0, "{}", None,
                    keep_result_for=keep,
                )
            )  # fmt: skip
        t0 = _cpu_ns(self.backend)
        await push_jobs(self.conn, None, jobs, None, answer="decided")
        t1 = _cpu_ns(self.backend)
        rows = await self.claim.fetch(None, ["q"], ["bench"] * n, new_leases(n))
        t2 = _cpu_ns(self.backend)
        if len(rows) != n:
            raise RuntimeError(f"claimed {len(rows)} of {n}")
        self.spent["push"] += t1 - t0
        self.spent["claim"] += t2 - t1
        self.jobs["push"] += n
        self.jobs["claim"] += n
        return {r["jid"]: str(r["lease"]) for r in rows}

    async def round(self, statements: int, fails: int, jids: count[int], words: bool) -> None:
        self.spent = dict.fromkeys(STEPS, 0)
        self.jobs = dict.fromkeys(STEPS, 0)
        self.claim = await self.conn.prepare(sql("job_fetch"))
        for _ in range(statements):
            for step, keep in (("ack", None), ("ack-kept", 3600)):
                leases = await self._push_claim(PER_STATEMENT, jids, words, keep)
                results = {jid: {"status": "ok"} for jid in leases} if keep else {}
                t0 = _cpu_ns(self.backend)
                done, _ = await ack_jobs(
                    self.conn, None, leases, keep_completed=False, results=results
                )
                self.spent[step] += _cpu_ns(self.backend) - t0
                self.jobs[step] += PER_STATEMENT
                if len(done) != PER_STATEMENT:
                    raise RuntimeError(f"acked {len(done)} of {PER_STATEMENT}")
            if fails:
                leases = await self._push_claim(fails, jids, words, None)
                t0 = _cpu_ns(self.backend)
                for jid, lease in leases.items():
                    failed = await fail_job(
                        self.conn, None, jid, lease, errtype="BenchError",
                        message="the export timed out", backtrace=[], retry_in=3600,
                        no_retry=False,
                    )  # fmt: skip
                    if failed is None:
                        raise RuntimeError(f"fail of {jid} found no attempt")
                self.spent["fail"] += _cpu_ns(self.backend) - t0
                self.jobs["fail"] += fails
        t0, w0 = _cpu_ns(self.backend), time.perf_counter()
        await self.conn.execute(sql("jobs_vacuum"))
        self.spent["vacuum"] = _cpu_ns(self.backend) - t0
        self.vacuum_ms.append((time.perf_counter() - w0) * 1000)
        for step in STEPS:
            per = self.jobs[step] if step != "vacuum" else 1
            if per:
                self.per_round[step].append(self.spent[step] / 1000 / per)


async def compare(
    dsn: str,
    upto: int,
    change: str,
    rounds: int,
    statements: int,
    fails: int,
    completed: int,
    words: bool,
) -> None:
    _pin(os.getpid(), 0)
    a = await Side.create(dsn, "werk_schema_a", upto, None, completed)
    b = await Side.create(dsn, "werk_schema_b", upto, change, completed)
    jids = count()
    try:
        for r in range(rounds):
            for side in (a, b) if r % 2 == 0 else (b, a):
                await side.round(statements, fails, jids, words)
        for side in (a, b):
            size = await side.conn.fetchval(
                "SELECT pg_size_pretty(pg_total_relation_size('werk_jobs'))"
            )
            print(f"# {side.name}: werk_jobs with its indexes at the end: {size}")
    finally:
        await a.conn.close()
        await b.conn.close()
    for step in STEPS:
        if not a.per_round[step]:
            continue
        unit = (
            "us of PostgreSQL CPU per VACUUM"
            if step == "vacuum"
            else "us of PostgreSQL CPU per job"
        )
        ratios = [y / x for x, y in zip(a.per_round[step], b.per_round[step], strict=True)]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(
            f"{step:8s} A median {statistics.median(a.per_round[step]):9.2f}  "
            f"B median {statistics.median(b.per_round[step]):9.2f} {unit};"
            f"  B / A per round: median {statistics.median(ratios):.3f} "
            f"(quartiles {q1:.3f}-{q3:.3f})"
        )
    ratios = [y / x for x, y in zip(a.vacuum_ms, b.vacuum_ms, strict=True)]
    print(
        f"vacuum   A median {statistics.median(a.vacuum_ms):9.2f}  "
        f"B median {statistics.median(b.vacuum_ms):9.2f} ms of wall time per VACUUM;"
        f"  B / A per round: median {statistics.median(ratios):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.schema_variants")
    parser.add_argument("change", type=Path, nargs="?", help="SQL run on database B only")
    parser.add_argument("--change-sql", help="the SQL run on database B, given inline")
    parser.add_argument(
        "--upto", type=int, help="the migrations both start from (default: all of them)"
    )
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--statements", type=int, default=5)
    parser.add_argument("--fails", type=int, default=200, help="jobs failed per statement round")
    parser.add_argument(
        "--completed", type=int, default=0, help="completed jobs with a result seeded first"
    )
    parser.add_argument("--args-words", action="store_true", help="push args holding words")
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/")
    args = parser.parse_args()
    if (args.change is None) == (args.change_sql is None):
        parser.error("give CHANGE.sql or --change-sql (one of them)")
    change = args.change_sql if args.change is None else args.change.read_text()
    upto = args.upto if args.upto is not None else available_migrations()[-1][0]
    asyncio.run(
        compare(
            args.dsn, upto, change, args.rounds, args.statements, args.fails, args.completed,
            args.args_words,
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
