"""The PgQueuer side of `python -m bench run peers`, run by the interpreter of bench/.peers-venv
(PgQueuer is not one of Werk's dependencies). PgQueuer through its own API: ``Queries.enqueue``
(one job, or lists for a batch) to produce, a ``QueueManager`` with a no-op entrypoint to
consume, in this one process; the protocol is python_driver's.

    python pgqueuer_driver.py '<options json>'
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
import uvloop
from pgqueuer import AsyncpgDriver, AsyncpgPoolDriver, Job, Queries, QueueManager
from python_driver import serve

ENTRYPOINT = "bench"


class PgQueuer:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    async def open(self) -> None:
        # Producers share a pool (several pushes in flight need several connections); each
        # worker gets a connection of its own, as PgQueuer's examples set it up.
        self.pool = await asyncpg.create_pool(self.options["dsn"], min_size=8, max_size=10)
        self.queries = Queries(AsyncpgPoolDriver(self.pool))
        if not await self.queries.schema_is_installed():
            await self.queries.install()

    async def push(self, i: int) -> None:
        await self.queries.enqueue(ENTRYPOINT, json.dumps({"i": i}).encode())

    async def push_batch(self, first: int, count: int) -> None:
        await self.queries.enqueue(
            [ENTRYPOINT] * count,
            [json.dumps({"i": first + k}).encode() for k in range(count)],
            [0] * count,
        )

    async def start_worker(self, mode: str, on_job: Callable[[int], None]) -> Callable[[], Any]:
        settings = dict(self.options["work" if mode == "throughput" else "latency"])
        conn = await asyncpg.connect(self.options["dsn"])
        qm = QueueManager(Queries(AsyncpgDriver(conn)))

        @qm.entrypoint(ENTRYPOINT)
        async def handle(job: Job) -> None:
            on_job(json.loads(job.payload or b"{}")["i"])

        task = asyncio.create_task(
            qm.run(
                batch_size=settings["batch_size"],
                max_concurrent_tasks=settings.get("max_concurrent_tasks"),
                dequeue_timeout=timedelta(seconds=settings.get("dequeue_timeout", 30)),
            )
        )

        async def stop() -> None:
            qm.shutdown.set()
            await task
            await conn.close()

        return stop

    async def close(self) -> None:
        await self.pool.close()


if __name__ == "__main__":
    uvloop.run(serve(PgQueuer(json.loads(sys.argv[1])), ["pgqueuer", "asyncpg"]))
