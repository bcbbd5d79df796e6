"""Bursts through running servers, side by side: each round pushes 20,000 jobs (batches of
1,000, four connections), then 32 workers fetch 100 and batch-ack until the queue is empty; the
rate of that second phase is printed. The servers take turns, a round each.

    PYTHONPATH=. .venv/bin/python bench/results/ack-plans/burst.py NAME=URL ... [--rounds 7]

Nothing here arranges the statistics: between bursts the table empties, and the server's VACUUM
and autovacuum's ANALYZE fall where they fall, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from urllib.parse import urlsplit

import orjson

from bench.httpclient import Connection

JOBS, BATCH, PUSHERS, WORKERS, COUNT = 20_000, 1_000, 4, 32, 100
QUEUE = "burst"


async def burst(url: str) -> float:
    parts = urlsplit(url)
    conns = [Connection(parts.hostname or "127.0.0.1", parts.port or 80) for _ in range(WORKERS)]
    batch = orjson.dumps({"jobs": [{"jobtype": "noop", "queue": QUEUE}] * BATCH})

    async def push(conn: Connection) -> None:
        for _ in range(JOBS // BATCH // PUSHERS):
            await conn.post_raw("/v1/jobs/batch", batch, headers=b"Prefer: return=minimal\r\n")

    async def work(conn: Connection, wid: str) -> int:
        done = 0
        fetch = orjson.dumps({"queues": [QUEUE], "wid": wid, "count": COUNT, "wait": 0})
        while jobs := orjson.loads(await conn.post_raw("/v1/fetch", fetch))["jobs"]:
            acks = [{"jid": j["jid"], "lease": j["lease"]} for j in jobs]
            await conn.post_json("/v1/ack", {"acks": acks})
            done += len(jobs)
        return done

    try:
        await asyncio.gather(*(push(c) for c in conns[:PUSHERS]))
        started = time.perf_counter()
        done = await asyncio.gather(*(work(c, f"burst-{i}") for i, c in enumerate(conns)))
        elapsed = time.perf_counter() - started
    finally:
        for c in conns:
            c.close()
    if sum(done) != JOBS:
        raise RuntimeError(f"{url}: {sum(done)} of {JOBS} jobs done")
    return JOBS / elapsed


async def main(servers: dict[str, str], rounds: int) -> None:
    rates: dict[str, list[float]] = {name: [] for name in servers}
    for r in range(rounds):
        for name in sorted(servers, reverse=r % 2 == 1):
            rates[name].append(await burst(servers[name]))
    for name, values in rates.items():
        print(f"{name:<6} " + " ".join(f"{v:>7,.0f}" for v in values) + "  jobs/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("servers", nargs="+", help="NAME=URL")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(dict(s.split("=", 1) for s in args.servers), args.rounds))
