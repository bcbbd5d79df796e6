"""Throughput of the Python SDK against a running Werk server.

    python client/python/bench_sdk.py --url http://127.0.0.1:7420 push        # Client.push loop
    python client/python/bench_sdk.py --url ... push-many                     # batches of 1,000
    python client/python/bench_sdk.py --url ... worker --fetch-size 1         # single fetch
    python client/python/bench_sdk.py --url ... worker --fetch-size 100       # batched fetch

``worker`` pushes N no-op jobs, starts one ``werk-worker`` process (concurrency 50 by default)
and measures jobs/s from the first completed job to the last, read from the server's counters.
This file is also the worker's handler module (``registry`` below). Use an otherwise idle
server: the counters are server-wide.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from werk_client import Client, JobSpec, Registry

registry = Registry()


@registry.handler("bench_noop")
def bench_noop(*args: object) -> None:
    """A sync no-op: measures the runtime's own overhead (thread hand-off included)."""


@registry.handler("bench_async_noop")
async def bench_async_noop(*args: object) -> None:
    """An async no-op: measures the runtime without the thread hand-off."""


def bench_push(client: Client, count: int, queue: str) -> float:
    start = time.perf_counter()
    for i in range(count):
        client.push("bench_noop", [i], queue=queue)
    return count / (time.perf_counter() - start)


def bench_push_many(client: Client, count: int, queue: str, batch: int) -> float:
    start = time.perf_counter()
    for offset in range(0, count, batch):
        n = min(batch, count - offset)
        client.push_many(JobSpec("bench_noop", [offset + i], queue=queue) for i in range(n))
    return count / (time.perf_counter() - start)


def bench_worker(
    client: Client,
    count: int,
    queue: str,
    concurrency: int,
    fetch_size: int,
    jobtype: str,
    process: bool,
) -> float:
    for offset in range(0, count, 1000):
        n = min(1000, count - offset)
        client.push_many(JobSpec(jobtype, [offset + i], queue=queue) for i in range(n))
    base = client.info().totals.processed
    here = Path(__file__).resolve().parent
    cmd = [
        sys.executable,
        "-m",
        "werk_client.worker_cli",
        "--queues",
        queue,
        "--concurrency",
        str(concurrency),
        "--fetch-size",
        str(fetch_size),
        "--log-level",
        "WARNING",
        "--url",
        client.url,
    ]
    if process:
        cmd.append("--process")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
    worker = subprocess.Popen([*cmd, "bench_sdk"], cwd=here, env=env)
    try:
        first: tuple[float, int] | None = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done = client.info().totals.processed - base
            now = time.perf_counter()
            if first is None and done > 0:
                first = (now, done)
            if done >= count:
                assert first is not None
                return (done - first[1]) / max(now - first[0], 1e-9)
            time.sleep(0.02)
        raise SystemExit("timed out waiting for the worker")
    finally:
        worker.terminate()
        worker.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("push", "push-many", "worker"))
    parser.add_argument("--url", default=os.environ.get("WERK_URL", "http://127.0.0.1:7420"))
    parser.add_argument("-n", "--count", type=int, default=5000)
    parser.add_argument("--queue", default="bench")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--fetch-size", type=int, default=100)
    parser.add_argument("--async-handler", action="store_true")
    parser.add_argument("--process", action="store_true")
    args = parser.parse_args()
    with Client(args.url) as client:
        if args.mode == "push":
            rate = bench_push(client, args.count, args.queue)
            label = "Client.push loop"
        elif args.mode == "push-many":
            rate = bench_push_many(client, args.count, args.queue, args.batch)
            label = f"push_many, batches of {args.batch}"
        else:
            jobtype = "bench_async_noop" if args.async_handler else "bench_noop"
            rate = bench_worker(
                client,
                args.count,
                args.queue,
                args.concurrency,
                args.fetch_size,
                jobtype,
                args.process,
            )
            label = (
                f"werk-worker c={args.concurrency} fetch-size={args.fetch_size} "
                f"{'async' if args.async_handler else 'sync'} no-op"
                f"{' process mode' if args.process else ''}"
            )
    print(f"{label}: {args.count} jobs, {rate:,.0f} jobs/s")


if __name__ == "__main__":
    main()
