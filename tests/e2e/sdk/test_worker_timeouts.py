"""Per-job execution timeouts: cancelled at the timeout, failed with ``Timeout`` at the latest
after the grace period, whatever the handler does, and its slot serves the next job."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from werk_client import AsyncClient, Registry, Worker
from werk_client.models import Failure

from . import timeout_jobs
from .test_worker_in_process import _eventually


async def _failure(client: AsyncClient, jid: str) -> Failure | None:
    return (await client.get(jid)).failure


async def _run_until(worker: Worker, done: Callable[[], Any], timeout: float = 20) -> None:
    running = asyncio.create_task(worker.run_async())
    try:
        await _eventually(done, timeout)
    finally:
        worker.stop(0)
        await asyncio.wait_for(running, 20)


def _worker(server_url: str, registry: Registry, **options: Any) -> Worker:
    options = {"concurrency": 1, "fetch_wait": 1, "beat_interval": 0.5, **options}
    return Worker(registry, url=server_url, timeout_grace=0.5, **options)


async def test_async_handler_is_cancelled_at_its_timeout(werk_server):
    registry = Registry()
    cancelled = asyncio.Event()

    @registry.handler("slow", timeout=0.5)
    async def slow(seconds):
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with AsyncClient(werk_server.url) as client:
        job = await client.push("slow", [30], retry=1)
        started = time.monotonic()
        failures: list[Failure] = []

        async def failed() -> bool:
            failure = await _failure(client, job.jid)
            if failure is not None:
                failures.append(failure)
            return bool(failures)

        await _run_until(_worker(werk_server.url, registry), failed)
        assert failures[0].errtype == "Timeout" and "0.5s" in failures[0].message
        assert cancelled.is_set()
        assert time.monotonic() - started < 10


async def test_per_job_custom_timeout_overrides_the_handlers(werk_server):
    registry = Registry()

    @registry.handler("slow", timeout=60)
    async def slow(seconds):
        await asyncio.sleep(seconds)
        return "finished"

    async with AsyncClient(werk_server.url) as client:
        short = await client.push("slow", [30], retry=1, custom={"timeout": 0.3})
        quick = await client.push("slow", [0.01], retry=1, keep_result_for=60)

        async def settled() -> bool:
            failure = await _failure(client, short.jid)
            result = await client.result(quick.jid)
            return failure is not None and result.state == "completed"

        await _run_until(_worker(werk_server.url, registry, concurrency=2), settled)
        failure = await _failure(client, short.jid)
        assert failure is not None and failure.errtype == "Timeout"


async def test_cancellation_ignored_still_fails_at_timeout_plus_grace_and_frees_the_slot(
    werk_server,
):
    registry = Registry()
    finished: list[str] = []

    @registry.handler("stubborn", timeout=0.3)
    async def stubborn():
        for _ in range(3):  # swallows the cancellation and sleeps on
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                continue

    @registry.handler("next")
    async def next_job():
        finished.append("next")

    async with AsyncClient(werk_server.url) as client:
        job = await client.push("stubborn", [], retry=1)
        after = await client.push("next", [], keep_result_for=60)
        started = time.monotonic()
        await _run_until(
            _worker(werk_server.url, registry),  # one slot: the next job needs the stubborn's
            lambda: bool(finished),
        )
        elapsed = time.monotonic() - started
        failure = await _failure(client, job.jid)
        assert failure is not None and failure.errtype == "Timeout"
        assert (await client.result(after.jid)).state == "completed"
        assert elapsed < 5  # long before the stubborn handler would have ended


async def test_thread_handler_sees_timed_out_and_returns(werk_server):
    registry = Registry()
    noticed = threading.Event()

    @registry.handler("polls", timeout=0.3)
    def polls(*, job):
        while not job.timed_out:
            time.sleep(0.02)
        noticed.set()
        return "stopped"

    async with AsyncClient(werk_server.url) as client:
        job = await client.push("polls", [], retry=1)

        async def failed() -> bool:
            return await _failure(client, job.jid) is not None

        await _run_until(_worker(werk_server.url, registry), failed)
        failure = await _failure(client, job.jid)
        assert failure is not None and failure.errtype == "Timeout"
        assert noticed.is_set()


async def test_thread_that_cannot_be_stopped_is_failed_and_its_slot_freed(werk_server):
    """A plain handler's thread cannot be killed: at timeout + grace the attempt is failed and
    the pool grows by one thread, so the next job runs while the old thread sleeps on."""
    registry = Registry()
    finished: list[str] = []

    @registry.handler("sleeps", timeout=0.3)
    def sleeps(seconds):
        time.sleep(seconds)

    @registry.handler("next")
    def next_job():
        finished.append("next")

    async with AsyncClient(werk_server.url) as client:
        job = await client.push("sleeps", [4], retry=1)
        await client.push("next", [])
        started = time.monotonic()
        await _run_until(_worker(werk_server.url, registry), lambda: bool(finished))
        assert time.monotonic() - started < 3.5
        failure = await _failure(client, job.jid)
        assert failure is not None and failure.errtype == "Timeout"


@pytest.mark.parametrize(
    ("handler", "reason"),
    [(timeout_jobs.sleeps, "SIGTERM stops it"), (timeout_jobs.ignores_sigterm, "killed")],
)
async def test_process_mode_stops_then_kills_the_child(werk_server, handler, reason):
    registry = Registry()
    registry.register("child", handler, timeout=0.5)
    async with AsyncClient(werk_server.url) as client:
        job = await client.push("child", [30], retry=1)

        async def failed() -> bool:
            return await _failure(client, job.jid) is not None

        started = time.monotonic()
        await _run_until(_worker(werk_server.url, registry, process=True), failed, timeout=30)
        failure = await _failure(client, job.jid)
        assert failure is not None and failure.errtype == "Timeout", reason
        assert time.monotonic() - started < 15


def test_a_timeout_the_reservation_cannot_cover_is_refused():
    registry = Registry()
    with pytest.raises(ValueError, match="positive"):
        registry.register("zero", lambda: None, timeout=0)
    with pytest.raises(ValueError, match="reserve_for"):
        registry.register("week", lambda: None, timeout=7 * 86_400)
    from werk_client import JobSpec

    with pytest.raises(ValueError, match=r"reserve_for \(60s\)"):
        JobSpec("x", reserve_for=60, custom={"timeout": 61})
    with pytest.raises(ValueError, match=r"reserve_for \(1800s\)"):
        JobSpec("x", custom={"timeout": 3600})
    with pytest.raises(ValueError, match="positive"):
        JobSpec("x", custom={"timeout": "soon"})
    assert JobSpec("x", reserve_for=120, custom={"timeout": 120}).custom == {"timeout": 120}
