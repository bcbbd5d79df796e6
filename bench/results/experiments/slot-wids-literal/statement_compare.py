import asyncio, os, statistics, subprocess, resource, sys
from pathlib import Path
sys.path.insert(0, "/work/main")
from bench.target import claim_database
from werk.db.queries import new_leases, slot_wids
def pg(pid): return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
def me():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
async def main():
    rounds, stmts, per = 16, 4, 2000
    conn = await claim_database("postgresql://postgres@127.0.0.1:5432/", "werk_claim_cmp", rounds * stmts * per * 2 + per)
    backend = await conn.fetchval("SELECT pg_backend_pid()")
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    new = await conn.prepare(Path("server/werk/db/sql/job_fetch.sql").read_text())
    old = await conn.prepare(Path("/tmp/base/server/werk/db/sql/job_fetch.sql").read_text())
    fetches = [(f"bench-w{i}", 100) for i in range(per // 100)]
    res = {"old": ([], []), "new": ([], [])}
    for r in range(rounds):
        order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
        for name, st in order:
            p0, c0, n = pg(backend), me(), 0
            for _ in range(stmts):
                arg = [w for w, k in fetches for _ in range(k)] if name == "old" else slot_wids(fetches)
                n += len(await st.fetch(None, ["q"], arg, new_leases(per)))
            res[name][0].append((pg(backend) - p0) / 1e3 / n); res[name][1].append((me() - c0) * 1e6 / n)
            await conn.execute("VACUUM werk_jobs")
    for name, (p, c) in res.items():
        print(f"{name}: postgres {statistics.median(p):.2f} us/job (min {min(p):.2f}), client {statistics.median(c):.2f} us/job")
    ratios = [b / a for a, b in zip(res["old"][0], res["new"][0])]
    print("pg new/old median", round(statistics.median(ratios), 3), "quartiles", [round(q, 3) for q in statistics.quantiles(ratios, n=4)])
    await conn.close()
asyncio.run(main())
