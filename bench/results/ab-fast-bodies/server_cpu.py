"""Interleaved server CPU per job: push batches of 1,000 (full answer), then fetch 100 + batch
ack, against servers A (port 8711) and B (8712); server CPU from /proc/<pid>/schedstat. Run from
the repository root: PYTHONPATH=. .venv/bin/python bench/results/ab-fast-bodies/server_cpu.py 30"""

import asyncio
import statistics
import subprocess
import sys
from pathlib import Path

import orjson

from bench.httpclient import open_connections
from bench.scenarios import ack_claimed, fetch_claimed


def pid(port):
    out = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if f":{port} " in line:
            return int(line.split("pid=")[1].split(",")[0])


def cpu(p):
    return int(Path(f"/proc/{p}/schedstat").read_text().split()[0])


async def main(rounds):
    sides = {"A": (8711, pid(8711)), "B": (8712, pid(8712))}
    conns = {s: await open_connections("127.0.0.1", port, 8) for s, (port, _) in sides.items()}
    body = orjson.dumps({"jobs": [{"jobtype": "noop", "args": [], "queue": "cpuq"}] * 1000})
    fetch = orjson.dumps({"queues": ["cpuq"], "wid": "w", "count": 100, "wait": 0})
    res = {s: {"push": [], "work": []} for s in sides}
    for r in range(rounds):
        order = "AB" if r % 2 == 0 else "BA"
        for s in order:
            p = sides[s][1]
            cs = conns[s]
            c0 = cpu(p)
            await asyncio.gather(
                *(c.post_raw("/v1/jobs/batch", body, expect=(201,)) for c in cs[:4] for _ in [0])
            )
            await asyncio.gather(
                *(c.post_raw("/v1/jobs/batch", body, expect=(201,)) for c in cs[:4] for _ in [0])
            )
            c1 = cpu(p)
            res[s]["push"].append((c1 - c0) / 8000 / 1000)

            async def work(c):
                n = 0
                while True:
                    jobs = await fetch_claimed(c, fetch)
                    if not jobs:
                        return n
                    await ack_claimed(c, jobs)
                    n += len(jobs)

            c0 = cpu(p)
            n = sum(await asyncio.gather(*(work(c) for c in cs)))
            c1 = cpu(p)
            assert n == 8000, n
            res[s]["work"].append((c1 - c0) / n / 1000)
    for s in sides:
        print(s, {k: (round(statistics.median(v), 2), round(min(v), 2)) for k, v in res[s].items()})
    print(
        "B/A push",
        round(
            statistics.median(
                [b / a for a, b in zip(res["A"]["push"], res["B"]["push"], strict=False)]
            ),
            3,
        ),
        "work",
        round(
            statistics.median(
                [b / a for a, b in zip(res["A"]["work"], res["B"]["work"], strict=False)]
            ),
            3,
        ),
    )


asyncio.run(main(int(sys.argv[1])))
