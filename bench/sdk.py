"""The `sdk` scenario: the same work through the Python SDK (client/python) instead of the lean
client: ``Client.push`` one job per call, ``Client.push_many`` and ``Client.push_jids`` in
batches of 1,000, and one ``werk-worker`` process (the SDK's worker CLI, concurrency 50) running
no-op handlers with fetches of 1 and of 100 jobs.

The worker's jobs are seeded into a paused queue and the worker is started and left to reach its
first long poll before the clock starts; the run is then: resume the queue, wait until the queue
is empty. So the figure is the worker's steady rate, not its start-up. The worker process's CPU
is reported beside the client's, server's and PostgreSQL's (``worker_us_per_job``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

from bench import procstat
from bench.httpclient import Connection
from bench.scenarios import Context, _timed, seed
from bench.target import REPO
from werk_client import Client, JobSpec

QUEUE = "bench-sdk"
# Stops at the first job found instead of counting the whole queue every 10 ms (with the single
# connection below: PostgreSQL's CPU per job in fetches of 100 read 57 us against 102 before, one
# run each; the two parts were not measured apart).
_LEFT = "SELECT EXISTS (SELECT 1 FROM werk_jobs WHERE queue = $1)"


def _url(ctx: Context) -> str:
    return f"http://{ctx.target.host}:{ctx.target.port}"


async def push(ctx: Context, batch: int, *, jids_only: bool = False) -> dict[str, Any]:
    """``ctx.jobs`` jobs from one producer thread: ``Client.push`` per job when ``batch`` is 1,
    else ``Client.push_many`` (or, ``jids_only``, ``Client.push_jids``) with ``batch`` jobs per
    call."""
    n = ctx.jobs

    def produce() -> int:
        with Client(_url(ctx)) as client:
            push_batch = client.push_jids if jids_only else client.push_many
            if batch == 1:
                for i in range(n):
                    client.push("noop", [i], queue=QUEUE)
            else:
                for offset in range(0, n, batch):
                    k = min(batch, n - offset)
                    push_batch(JobSpec("noop", [offset + i], queue=QUEUE) for i in range(k))
        return n

    return await _timed(ctx, lambda: asyncio.to_thread(produce))


async def _admin(ctx: Context, action: str) -> None:
    conn = Connection(ctx.target.host, ctx.target.port)
    await conn.connect()
    try:
        await conn.post_raw(f"/v1/queues/{QUEUE}/{action}", b"", expect=(200,))
    finally:
        conn.close()


async def worker(ctx: Context, fetch_size: int, handler: str = "async") -> dict[str, Any]:
    """One ``werk-worker`` (concurrency 50, ``fetch_size`` jobs per fetch) drains ``ctx.jobs``
    seeded no-op jobs."""
    n = ctx.jobs
    await _admin(ctx, "pause")
    await seed(ctx, QUEUE, n, prefix="sdk")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
    env["BENCH_SDK_HANDLER"] = handler
    cmd = [
        sys.executable, "-m", "werk_client.worker_cli", "bench.sdk_handlers", "--url", _url(ctx),
        "--queues", QUEUE, "--concurrency", "50", "--fetch-size", str(fetch_size),
        "--log-level", "WARNING",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, env=env)
    try:
        await asyncio.sleep(3.0)  # imported, registered, and long-polling the paused queue
        if proc.poll() is not None:
            raise RuntimeError(f"werk-worker exited with status {proc.returncode}")
        before = procstat.cpu_seconds(procstat.process_tree(proc.pid))
        # One connection for all the polls, opened before the clock starts: a connection per
        # poll cost PostgreSQL a new backend every 10 ms, counted in its CPU per job.
        async with ctx.db() as db:

            async def drain() -> int:
                await _admin(ctx, "resume")
                deadline = time.monotonic() + 600
                while await db.c.fetchval(_LEFT, QUEUE):
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError("the worker stopped draining the queue")
                    await asyncio.sleep(0.01)
                return n

            r = await _timed(ctx, drain)
        used = procstat.cpu_seconds(procstat.process_tree(proc.pid)) - before
        r["worker_us_per_job"] = round(1e6 * used / n, 1)
        return r
    finally:
        proc.terminate()
        proc.wait(30)
