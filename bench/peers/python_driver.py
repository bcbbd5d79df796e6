"""What the Python peers' drivers share (bench/peers/pgqueuer_driver.py, werk_driver.py): the
protocol of bench/peers/node/driver.mjs (commands arrive as JSON lines on stdin, answers leave as
JSON lines on stdout) and the measurements, each taken on the driver's own clock. A driver is
run as a script, so this module is imported from the script's directory."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any, Protocol


class Peer(Protocol):
    """One queue library, producer and worker in the driver's process."""

    async def open(self) -> None: ...

    async def push(self, i: int) -> None: ...

    async def push_batch(self, first: int, count: int) -> None: ...

    async def start_worker(
        self, mode: str, on_job: Callable[[int], None]
    ) -> Callable[[], Awaitable[None]]:
        """``mode``: "throughput" or "latency"; ``on_job(i)`` is called as each job's handler
        starts. Returns what stops the worker."""
        ...

    async def close(self) -> None: ...


def reply(value: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


async def push(peer: Peer, jobs: int, inflight: int) -> dict[str, Any]:
    counter = iter(range(jobs))

    async def loop() -> None:
        for i in counter:
            await peer.push(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(inflight)))
    return {"jobs": jobs, "seconds": time.perf_counter() - t0}


async def batch(peer: Peer, jobs: int, size: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    for first in range(0, jobs, size):
        await peer.push_batch(first, min(size, jobs - first))
    return {"jobs": jobs, "seconds": time.perf_counter() - t0}


async def work(peer: Peer, jobs: int) -> dict[str, Any]:
    """The worker drains ``jobs`` jobs pushed before it started: first handler start to last."""
    seen = 0
    first = last = 0.0
    finished = asyncio.Event()

    def on_job(i: int) -> None:
        nonlocal seen, first, last
        now = time.perf_counter()
        if seen == 0:
            first = now
        seen += 1
        last = now
        if seen >= jobs:
            finished.set()

    stop = await peer.start_worker("throughput", on_job)
    try:
        await asyncio.wait_for(finished.wait(), 600)
    finally:
        await stop()
    return {"jobs": jobs, "seconds": last - first, "handled": seen}


async def latency(peer: Peer, jobs: int, interval_ms: float, settle_ms: float) -> dict[str, Any]:
    """One job every ``interval_ms`` into an idle worker: push call → handler start, per job."""
    sent = [0.0] * jobs
    delays: list[float] = []
    finished = asyncio.Event()

    def on_job(i: int) -> None:
        delays.append(1e3 * (time.perf_counter() - sent[i]))
        if len(delays) >= jobs:
            finished.set()

    stop = await peer.start_worker("latency", on_job)
    try:
        await asyncio.sleep(settle_ms / 1e3)
        t0 = time.perf_counter()
        pushes = []
        for i in range(jobs):
            wait = t0 + i * interval_ms / 1e3 - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            sent[i] = time.perf_counter()
            pushes.append(asyncio.create_task(peer.push(i)))
        await asyncio.gather(*pushes)
        await asyncio.wait_for(finished.wait(), 30)
    finally:
        await stop()
    delays.sort()
    return {
        "jobs": jobs,
        "p50_ms": percentile(delays, 50),
        "p99_ms": percentile(delays, 99),
        "max_ms": delays[-1],
    }


async def serve(peer: Peer, packages: list[str]) -> None:
    """Answers the harness's commands on stdin until it says exit (or closes stdin); the
    versions reported are Python's and those of ``packages``."""
    await peer.open()
    versions = {"python": sys.version.split()[0]}
    versions.update((name, metadata.version(name)) for name in packages)
    reply({"ready": True, "versions": versions, "pid": os.getpid()})
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            break
        command = json.loads(line)
        if command["cmd"] == "exit":
            break
        cpu0 = cpu_seconds()
        try:
            cmd = command["cmd"]
            if cmd == "push":
                result = await push(peer, command["jobs"], command["inflight"])
            elif cmd in ("batch", "seed"):
                result = await batch(peer, command["jobs"], command["size"])
            elif cmd == "work":
                result = await work(peer, command["jobs"])
            elif cmd == "latency":
                result = await latency(
                    peer, command["jobs"], command["interval_ms"], command["settle_ms"]
                )
            else:
                raise ValueError(f"unknown command {cmd}")
            reply({"ok": True, **result, "driver_cpu_s": cpu_seconds() - cpu0})
        except Exception as error:
            reply({"ok": False, "error": repr(error)})
    await peer.close()
