"""The `sdk` scenario: the same work through the Python SDK (client/python) instead of the lean
client: ``Client.push`` one job per call, ``AsyncClient.push`` with 8 calls in flight,
``Client.push_many`` and ``Client.push_jids`` in batches of 1,000, one ``werk-worker`` process
(the SDK's worker CLI) running no-op handlers, the delay from a push to its handler's start on
an idle werk-worker, and how long building a client takes. The producers run on threads of
their own (``AsyncClient`` on a standard asyncio loop there), as in an application.

The worker's jobs are seeded into a paused queue and the worker is started and left to reach its
first long poll before the clock starts; the run is then: resume the queue, wait until the queue
is empty. So the figure is the worker's steady rate, not its start-up. The worker process's CPU
is reported beside the client's, server's and PostgreSQL's (``worker_us_per_job``).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from bench import procstat
from bench.httpclient import Connection
from bench.scenarios import Context, pct, seed, timed, wait_quiet
from bench.target import REPO
from werk_client import AsyncClient, Client, JobSpec

QUEUE = "bench-sdk"
# Stops at the first job found instead of counting the whole queue: the poll runs every 10 ms
# beside the measured work, and PostgreSQL's CPU it takes is counted in the figures.
_LEFT = "SELECT EXISTS (SELECT 1 FROM werk_jobs WHERE queue = $1)"


def _url(ctx: Context) -> str:
    return f"http://{ctx.target.host}:{ctx.target.port}"


async def push(ctx: Context, batch: int, *, jids_only: bool = False) -> dict[str, Any]:
    """``ctx.jobs`` jobs from one producer thread: ``Client.push`` per job when ``batch`` is 1,
    else ``Client.push_many`` (or, ``jids_only``, ``Client.push_jids``) with ``batch`` jobs per
    call. As in the lean rows, the client is built and warmed up (its connection open, the
    server's statements prepared) before the clock starts: an application pushes through a
    client it keeps."""
    n = ctx.jobs
    client = Client(_url(ctx))
    push_batch = client.push_jids if jids_only else client.push_many

    def call(offset: int, k: int) -> None:
        if k == 1:
            client.push("noop", [offset], queue=QUEUE)
        else:
            push_batch(JobSpec("noop", [offset + i], queue=QUEUE) for i in range(k))

    def produce() -> int:
        for offset in range(0, n, batch):
            call(offset, min(batch, n - offset))
        return n

    try:
        await asyncio.to_thread(call, n, batch)
        return await timed(ctx, lambda: asyncio.to_thread(produce))
    finally:
        client.close()


async def push_async(ctx: Context, in_flight: int) -> dict[str, Any]:
    """``ctx.jobs`` jobs by ``AsyncClient.push``, ``in_flight`` calls at a time, on a standard
    asyncio loop in a thread of its own; the client warmed up before the clock starts (one call
    per connection), as in the lean rows."""
    n = ctx.jobs
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="bench-sdk-producer")
    thread.start()

    def on_loop(coro: Coroutine[Any, Any, int]) -> asyncio.Future[int]:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    async def start() -> AsyncClient:
        return AsyncClient(_url(ctx))

    client = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(start(), loop))

    async def produce_async(jobs: int) -> int:
        remaining = jobs

        async def one() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await client.push("noop", [remaining], queue=QUEUE)

        await asyncio.gather(*(one() for _ in range(in_flight)))
        return jobs

    try:
        await on_loop(produce_async(in_flight))
        return await timed(ctx, lambda: on_loop(produce_async(n)))
    finally:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(client.aclose(), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        loop.close()


async def _admin(ctx: Context, action: str) -> None:
    conn = Connection(ctx.target.host, ctx.target.port)
    await conn.connect()
    try:
        await conn.post_raw(f"/v1/queues/{QUEUE}/{action}", b"", expect=(200,))
    finally:
        conn.close()


def _worker_process(
    ctx: Context, fetch_size: int, concurrency: int, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
    cmd = [
        sys.executable, "-m", "werk_client.worker_cli", "bench.sdk_handlers", "--url", _url(ctx),
        "--queues", QUEUE, "--concurrency", str(concurrency), "--fetch-size", str(fetch_size),
        "--log-level", "WARNING",
    ]  # fmt: skip
    return subprocess.Popen(cmd, cwd=REPO, env={**base, **env})


async def worker(
    ctx: Context, fetch_size: int, handler: str = "async", concurrency: int = 50
) -> dict[str, Any]:
    """One ``werk-worker`` (``concurrency``, ``fetch_size`` jobs per fetch) drains ``ctx.jobs``
    seeded no-op jobs."""
    n = ctx.jobs
    await _admin(ctx, "pause")
    await seed(ctx, QUEUE, n, prefix="sdk")
    proc = _worker_process(ctx, fetch_size, concurrency, {"BENCH_SDK_HANDLER": handler})
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

            r = await timed(ctx, drain)
        used = procstat.cpu_seconds(procstat.process_tree(proc.pid)) - before
        r["worker_us_per_job"] = round(1e6 * used / n, 1)
        return r
    finally:
        proc.terminate()
        proc.wait(30)


async def latency(ctx: Context) -> dict[str, Any]:
    """Push → handler start on an idle werk-worker: one ``Client.push`` every
    ``ctx.latency_interval`` seconds (``ctx.latency_jobs`` of them) from a producer thread; the
    handler notes how long after the push was sent it started."""
    n = ctx.latency_jobs
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "latency.txt"
        proc = _worker_process(ctx, 100, 50, {"BENCH_SDK_LATENCY_FILE": str(path)})
        try:
            await asyncio.sleep(3.0)
            if proc.poll() is not None:
                raise RuntimeError(f"werk-worker exited with status {proc.returncode}")
            if ctx.quiet_wait > 0:
                await wait_quiet(ctx)

            def produce() -> list[float]:
                rtt = []
                with Client(_url(ctx)) as client:
                    client.push("started", [time.monotonic()], queue=QUEUE)  # warm-up
                    time.sleep(0.2)
                    start = time.monotonic()
                    for i in range(n):
                        delay = start + i * ctx.latency_interval - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                        t0 = time.monotonic()
                        client.push("started", [t0], queue=QUEUE)
                        rtt.append(time.monotonic() - t0)
                return rtt

            rtt = await asyncio.to_thread(produce)
            deadline = time.monotonic() + 30
            while _lines(path) < n + 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait(30)
        ms = [1e3 * float(x) for x in path.read_text().split()[1:]]
    if len(ms) < n:
        raise RuntimeError(f"only {len(ms)} of {n} jobs reached their handler")
    return {
        "jobs": n,
        "p50_ms": round(pct(ms, 50), 3),
        "p99_ms": round(pct(ms, 99), 3),
        "max_ms": round(max(ms), 3),
        "push_rtt_p50_ms": round(1e3 * pct(rtt, 50), 3),
    }


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


_CONSTRUCT = """
import json, sys, time
from werk_client import AsyncClient, Client
t0 = time.perf_counter(); c = Client(sys.argv[1]); t1 = time.perf_counter()
a = AsyncClient(sys.argv[1]); t2 = time.perf_counter()
c.close()
print(json.dumps({"client_ms": 1e3 * (t1 - t0), "async_client_ms": 1e3 * (t2 - t1)}))
"""


def construction(ctx: Context, runs: int = 5) -> dict[str, Any]:
    """The first ``Client()`` and ``AsyncClient()`` of a fresh process (package imported)."""
    samples = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _CONSTRUCT, _url(ctx)],
                check=True,
                capture_output=True,
                text=True,
                cwd=REPO,
            ).stdout
        )
        for _ in range(runs)
    ]
    return {
        key: round(statistics.median(s[key] for s in samples), 3)
        for key in ("client_ms", "async_client_ms")
    }


# -- the target table -------------------------------------------------------------------------


def _rate(r: dict[str, Any] | None) -> str:
    return "-" if r is None else f"{r['median']:,.0f} jobs/s"


def _cpu(r: dict[str, Any] | None, who: str) -> float:
    cost = (r or {}).get("cpu_us_per_job_median", {})
    return float(cost.get(who, float("nan")))


def _verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def target_rows(
    m: dict[str, dict[str, Any]],
    ratios: dict[str, float],
    latency: dict[str, float],
    lean_latency: dict[str, float],
    built: dict[str, float],
) -> list[dict[str, str]]:
    """Issue 30's targets: what the SDK did, what the lean client did in the same run.
    ``ratios``: SDK / lean, the median over rounds that ran the two in turn."""

    def median(key: str) -> float:
        return float(m[key]["median"]) if key in m else float("nan")

    rows = []
    ratio = ratios["push1"]
    rows.append(
        {
            "scenario": "Client.push, one at a time",
            "sdk": _rate(m.get("push1")) + f" (client {_cpu(m.get('push1'), 'client'):.0f} us/job)",
            "lean": _rate(m.get("lean_push1")) + " (1 connection)",
            "target": f">= 0.8 x lean, run by run: {ratio:.2f} x {_verdict(ratio >= 0.8)}",
        }
    )
    rows.append(
        {
            "scenario": "AsyncClient.push, 8 in flight",
            "sdk": _rate(m.get("push8")) + f" (client {_cpu(m.get('push8'), 'client'):.0f} us/job)",
            "lean": _rate(m.get("lean_push8")) + " (8 connections)",
            "target": f">= 5,000 jobs/s {_verdict(median('push8') >= 5000)}",
        }
    )
    many_cpu = _cpu(m.get("many"), "client")
    ratio = ratios["many"]
    rows.append(
        {
            "scenario": "push_many, 1,000 per call, full answer",
            "sdk": _rate(m.get("many")) + f" (client {many_cpu:.1f} us/job)",
            "lean": _rate(m.get("lean_many")) + " (1 connection)",
            "target": f">= 0.8 x lean, run by run: {ratio:.2f} x {_verdict(ratio >= 0.8)}; "
            f"client <= 5 us/job {_verdict(many_cpu <= 5)}",
        }
    )
    rows.append(
        {
            "scenario": "push_jids, 1,000 per call (jids only)",
            "sdk": _rate(m.get("jids")) + f" (client {_cpu(m.get('jids'), 'client'):.1f} us/job)",
            "lean": "-",
            "target": "-",
        }
    )
    for key, label in (("work_async_200", "200"), ("work_async_1000", "1,000")):
        worker_cpu = _cpu(m.get(key), "worker")
        ok = median(key) >= 30_000 and worker_cpu <= 25
        rows.append(
            {
                "scenario": f"one werk-worker, async no-op, concurrency {label}",
                "sdk": _rate(m.get(key)) + f" (worker {worker_cpu:.0f} us/job)",
                "lean": _rate(m.get("lean_work")) + " (fetch 100 + batch ack, 32 connections)",
                "target": f">= 30,000 jobs/s, worker <= 25 us/job {_verdict(ok)}",
            }
        )
    worker_cpu = _cpu(m.get("work_sync"), "worker")
    rows.append(
        {
            "scenario": "one werk-worker, sync no-op, concurrency 50",
            "sdk": _rate(m.get("work_sync")) + f" (worker {worker_cpu:.0f} us/job)",
            "lean": _rate(m.get("lean_work")),
            "target": f">= 10,000 jobs/s {_verdict(median('work_sync') >= 10_000)}",
        }
    )
    ratio = latency["p50_ms"] / lean_latency["p50_ms"]
    ok = latency["p50_ms"] <= 1.5 and latency["p99_ms"] <= 4 and ratio <= 1.3
    rows.append(
        {
            "scenario": "push -> handler start, idle worker (p50 / p99)",
            "sdk": f"{latency['p50_ms']:.2f} / {latency['p99_ms']:.2f} ms",
            "lean": f"{lean_latency['p50_ms']:.2f} / {lean_latency['p99_ms']:.2f} ms "
            "(push -> fetch answered)",
            "target": f"p50 <= 1.5, p99 <= 4 ms, p50 <= 1.3 x lean: {ratio:.2f} x {_verdict(ok)}",
        }
    )
    ok = built["client_ms"] <= 1 and built["async_client_ms"] <= 1
    rows.append(
        {
            "scenario": "Client() / AsyncClient() construction, http://",
            "sdk": f"{built['client_ms']:.2f} / {built['async_client_ms']:.2f} ms",
            "lean": "-",
            "target": f"<= 1 ms {_verdict(ok)}",
        }
    )
    return rows


def target_table(rows: list[dict[str, str]]) -> str:
    lines = ["", "| scenario | SDK | lean client, same run | target |", "|---|---|---|---|"]
    lines += [f"| {r['scenario']} | {r['sdk']} | {r['lean']} | {r['target']} |" for r in rows]
    return "\n".join(lines) + "\n"
