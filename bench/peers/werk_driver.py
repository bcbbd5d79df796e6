"""Werk through its Python SDK, as a peer of `python -m bench run peers`: ``AsyncClient.push`` /
``push_many`` to produce, a ``Worker`` with an async no-op handler to consume, in this one
process, with the worker settings the TypeScript and Go clients get. Against the `werk serve`
the harness runs; the protocol is python_driver's. The `sdk` scenario measures the same SDK
with the worker in a process of its own (`werk-worker`).

    python werk_driver.py '<options json>'
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop
from python_driver import serve

from werk_client import AsyncClient, JobSpec, Worker

QUEUE = "bench-peers"
# The harness's worker settings are named as the TypeScript and Go clients name them.
SETTINGS = {"concurrency": "concurrency", "fetchBatch": "fetch_size", "fetchWait": "fetch_wait"}


class Werk:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    async def open(self) -> None:
        self.client = AsyncClient(self.options["url"])

    async def push(self, i: int) -> None:
        await self.client.push("noop", [i], queue=QUEUE)

    async def push_batch(self, first: int, count: int) -> None:
        await self.client.push_many(
            [JobSpec("noop", [first + k], queue=QUEUE) for k in range(count)]
        )

    async def start_worker(
        self, mode: str, on_job: Callable[[int], None]
    ) -> Callable[[], Awaitable[None]]:
        settings = self.options["work" if mode == "throughput" else "latency"]

        async def noop(i: int) -> None:
            on_job(i)

        worker = Worker(
            {"noop": noop},
            url=self.options["url"],
            queues=(QUEUE,),
            **{SETTINGS[k]: v for k, v in settings.items()},
        )
        running = asyncio.create_task(worker.run_async())

        async def stop() -> None:
            worker.stop()
            await running

        return stop

    async def close(self) -> None:
        await self.client.aclose()


if __name__ == "__main__":
    uvloop.run(serve(Werk(json.loads(sys.argv[1])), ["werk-client"]))
