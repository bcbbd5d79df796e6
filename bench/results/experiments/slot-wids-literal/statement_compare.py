"""The claim statement alone, before and after the change, interleaved on one connection.

    python bench/results/experiments/slot-wids-literal/statement_compare.py OLD_job_fetch.sql

Run from a checkout with change.patch applied (its job_fetch.sql and slot_wids are the "new"
side); OLD_job_fetch.sql is the statement without it (a worktree of a9a0c49). Prints the
PostgreSQL CPU (the backend's /proc schedstat) and this process's CPU per claimed job.
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import sys
from pathlib import Path

from bench.target import claim_database
from werk.db.queries import new_leases, slot_wids  # type: ignore[attr-defined]


def _pg_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _own() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main(old_sql: Path) -> None:
    rounds, statements, per = 16, 4, 2000
    dsn = "postgresql://postgres@127.0.0.1:5432/"
    conn = await claim_database(dsn, "werk_claim_cmp", rounds * statements * per * 2 + per)
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    new = await conn.prepare(Path("server/werk/db/sql/job_fetch.sql").read_text())
    old = await conn.prepare(old_sql.read_text())
    fetches = [(f"bench-w{i}", 100) for i in range(per // 100)]
    pg: dict[str, list[float]] = {"old": [], "new": []}
    own: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(rounds):
        sides = [("old", old), ("new", new)]
        for name, statement in sides if r % 2 == 0 else sides[::-1]:
            p0, c0, n = _pg_ns(backend), _own(), 0
            for _ in range(statements):
                wids: object = (
                    [w for w, k in fetches for _ in range(k)]
                    if name == "old"
                    else slot_wids(fetches)
                )
                n += len(await statement.fetch(None, ["q"], wids, new_leases(per)))
            pg[name].append((_pg_ns(backend) - p0) / 1e3 / n)
            own[name].append((_own() - c0) * 1e6 / n)
            await conn.execute("VACUUM werk_jobs")
    await conn.close()
    for name in ("old", "new"):
        print(
            f"{name}: postgres {statistics.median(pg[name]):.2f} us/job "
            f"(min {min(pg[name]):.2f}), this process {statistics.median(own[name]):.2f} us/job"
        )
    ratios = [b / a for a, b in zip(pg["old"], pg["new"], strict=True)]
    print("postgres new/old: median", round(statistics.median(ratios), 3))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
