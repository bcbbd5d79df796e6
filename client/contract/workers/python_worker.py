"""The Python SDK's contract worker: the handlers every SDK's contract worker registers (see
client/contract/README.md, "Worker scenarios"), configured from the environment."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from typing import Any

from werk_client import Job, NoRetry, Registry, RetryIn, Worker

registry = Registry()
counter = itertools.count(1)


@registry.handler("echo")
async def echo(value: Any) -> Any:
    return value


@registry.handler("slow", timeout=0.5)
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)  # cancelled at the timeout
    return "finished"


@registry.handler("stubborn", timeout=0.5)
def stubborn(seconds: float) -> str:
    time.sleep(seconds)  # a thread: nothing can interrupt it
    return "finished"


@registry.handler("sleep")
async def sleep(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "finished"


@registry.handler("retry_in")
async def retry_in(seconds: float) -> None:
    raise RetryIn(seconds, "come back later", errtype="Later")


@registry.handler("no_retry")
async def no_retry() -> None:
    raise NoRetry("cannot ever work", errtype="Hopeless")


@registry.handler("marks")
async def marks(*, job: Job) -> Any:
    return job.custom.get("marks")


@registry.handler("resume")
async def resume(*, job: Job) -> Any:
    if job.progress is None:
        await job.acheckpoint({"step": 1})
        raise RetryIn(0, "checkpointed")
    return job.progress


@registry.handler("order")
async def order() -> int:
    return next(counter)


@registry.middleware
async def mark(job: Job, call_next: Any) -> None:
    job.custom.setdefault("marks", []).append("outer")
    await call_next()


@registry.middleware
async def mark_inner(job: Job, call_next: Any) -> None:
    job.custom.setdefault("marks", []).append("inner")
    await call_next()


def main() -> None:
    env = os.environ
    Worker(
        registry,
        queues=env["QUEUES"].split(","),
        weights=json.loads(env.get("WEIGHTS") or "{}"),
        concurrency=int(env.get("CONCURRENCY", "5")),
        fetch_size=int(env.get("FETCH_BATCH", "100")),
        fetch_wait=1,
        beat_interval=0.5,
        grace=float(env.get("GRACE_MS", "5000")) / 1000,
        timeout_grace=float(env.get("TIMEOUT_GRACE_MS", "300")) / 1000,
    ).run()


if __name__ == "__main__":
    main()
