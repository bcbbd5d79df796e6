"""Handlers that the worker tests run in real `werk-worker` processes.

Handlers leave evidence in files under $SDK_TEST_DIR (one line per event, appended), which the
tests read: the worker runs in another process, so files are the simplest honest channel.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from pathlib import Path
from typing import Any

from werk_client import Job, NoRetry, Registry, RetryIn

registry = Registry()


def _note(name: str, line: str) -> None:
    path = Path(os.environ["SDK_TEST_DIR"]) / name
    with path.open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@registry.middleware
async def record_middleware(job: Job, call_next: Any) -> None:
    _note("middleware.txt", f"before {job.jobtype} {job.jid}")
    try:
        await call_next()
    finally:
        _note("middleware.txt", f"after {job.jobtype} {job.jid}")


@registry.handler("noop")
def noop(*args: Any) -> None:
    return None


@registry.handler("async_noop")
async def async_noop(*args: Any) -> None:
    return None


@registry.handler("record")
def record(token: str) -> None:
    _note("done.txt", f"{token} {os.getpid()}")


@registry.handler("async_record")
async def async_record(token: str, *, job: Job) -> None:
    await asyncio.sleep(0)
    _note("done.txt", f"{token} {job.jid} attempt={job.attempt}")


@registry.handler("whole_job", with_job=True)
def whole_job(job: Job) -> None:
    _note("done.txt", f"whole {job.args[0]} {job.jid}")


@registry.handler("boom")
def boom(message: str) -> None:
    raise ValueError(message)


@registry.handler("retry_in")
def retry_in(seconds: float) -> None:
    raise RetryIn(seconds, "rate limited")


@registry.handler("no_retry")
def no_retry(message: str) -> None:
    try:
        int(message)
    except ValueError as exc:
        raise NoRetry() from exc


@registry.handler("sleepy")
def sleepy(seconds: float, token: str, *, job: Job) -> None:
    """Long on the first attempt only, so a retried attempt finishes at once."""
    _note("started.txt", f"{token} attempt={job.attempt}")
    if job.attempt <= 1:
        time.sleep(seconds)
    _note("done.txt", f"{token} attempt={job.attempt}")


@registry.handler("async_sleepy")
async def async_sleepy(seconds: float, token: str, *, job: Job) -> None:
    _note("started.txt", f"{token} attempt={job.attempt}")
    if job.attempt <= 1:
        await asyncio.sleep(seconds)
    _note("done.txt", f"{token} attempt={job.attempt}")


@registry.handler("steps")
def steps(total: int, delay: float, *, job: Job) -> None:
    """Resumable: starts after the last checkpointed step."""
    start = (job.progress or {}).get("done", 0)
    _note("steps.txt", f"start attempt={job.attempt} from={start}")
    for step in range(start, total):
        time.sleep(delay)
        _note("steps.txt", f"step {step} attempt={job.attempt}")
        job.checkpoint({"done": step + 1})
    _note("done.txt", f"steps attempt={job.attempt}")


@registry.handler("async_steps")
async def async_steps(total: int, *, job: Job) -> None:
    start = (job.progress or {}).get("done", 0)
    for step in range(start, total):
        await job.acheckpoint({"done": step + 1})
    _note("done.txt", f"async_steps from={start}")


@registry.handler("exit_hard")
def exit_hard(code: int) -> None:
    os._exit(code)


@registry.handler("segfault")
def segfault() -> None:
    ctypes.string_at(0)


@registry.handler("pid")
def pid(token: str) -> None:
    _note("done.txt", f"{token} pid={os.getpid()}")


def answer(x: int) -> dict[str, Any]:
    """Returns its result (sent with the ack)."""
    return {"answer": x * 2}
