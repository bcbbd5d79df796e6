"""``Worker``: fetches jobs, runs their handlers, and reports every outcome to the server.

One asyncio loop drives everything: a fetch loop (long polls for up to the free capacity), a
beat loop (heartbeats; obeys ``quiet``/``terminate``), and one task per running job that runs
the handler (as a task, in a thread, or in a child process), keeps its lease extended, and
finally acks or fails it.

The rule that shapes the shutdown code: a job this worker holds a lease on is never dropped
silently. It is acked, failed (so it retries), or, if the server cannot be reached, logged
with its jid and left to the server's lease expiry / lost-worker detection to retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import httpx

from . import protocol
from .acks import AckBatcher
from .async_client import AsyncClient
from .errors import (
    Forbidden,
    JobNotFound,
    LeaseLost,
    Unauthorized,
    ValidationError,
    WerkError,
)
from .failures import FailureReport, describe_failure
from .job import Job
from .models import JobRecord, WorkerState, new_jid
from .process_mode import ProcessRunner
from .registry import Handler, Middleware, Registry
from .threads import DaemonThreadPool
from .worker_config import WorkerConfig

__all__ = ["Worker"]

F = TypeVar("F", bound=Callable[..., Any])

# Tries to deliver an ack/fail when the server is unreachable (each try already retried by the
# client); fewer while shutting down so an outage cannot hold the exit for long.
_SETTLE_ATTEMPTS = 6
_SETTLE_ATTEMPTS_SHUTTING_DOWN = 3
_SETTLE_BACKOFF_CAP = 10.0
_REFUSED = "(the failure details were refused by the server)"


def _rss_kb() -> int | None:
    """Current resident memory of this process, for the dashboard (Linux; else peak RSS)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError):
        try:
            import resource

            return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        except (ImportError, OSError):
            return None


async def _call_hook(hook: Callable[[], Any]) -> None:
    result = hook()
    if inspect.isawaitable(result):
        await result


class _Running:
    """One job this worker holds a lease on, from fetch until it is settled or lost.

    Also the job's ``LeaseControl``: checkpoints go through the worker's client and loop.
    """

    __slots__ = (
        "handler",
        "handling",
        "job",
        "lost",
        "next_extend",
        "record",
        "settled",
        "started",
        "task",
        "worker",
    )

    def __init__(self, record: JobRecord, handler: Handler | None, worker: Worker) -> None:
        self.record = record
        self.handler = handler
        self.handling = True  # holds a slot until its handler returns (Worker._free)
        self.worker = worker
        self.settled = False
        self.lost = False
        self.started = time.monotonic()
        self.next_extend = self.started + worker.extend_interval(record)
        self.task: asyncio.Task[None] | None = None
        self.job = Job(record, self, worker.log)

    @property
    def lease(self) -> str:
        assert self.record.lease is not None, "fetched jobs always carry a lease"
        return self.record.lease

    @property
    def lease_lost(self) -> bool:
        return self.lost

    async def checkpoint(self, progress: Any) -> None:
        await self.worker._extend(self, progress=progress)

    def checkpoint_blocking(self, progress: Any) -> None:
        loop = self.worker._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("the worker is no longer running")
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is loop:
                raise TypeError("in an async handler use `await job.acheckpoint(progress)`")
        asyncio.run_coroutine_threadsafe(self.checkpoint(progress), loop).result()

    def fields(self, **more: Any) -> dict[str, Any]:
        return {
            "jid": self.record.jid,
            "jobtype": self.record.jobtype,
            "queue": self.record.queue,
            "attempt": self.record.attempt,
            **more,
        }


class Worker:
    """Runs handlers for jobs fetched from a Werk server.

    ``Worker(registry, queues=["critical", "default"], concurrency=20).run()``: blocks until
    SIGTERM/SIGINT (or ``stop()``/``terminate()`` from another thread, or the server says
    ``terminate``). Options not given are read from ``WERK_*`` environment variables (see
    ``WorkerConfig``); ``url``/``token`` default to ``WERK_URL``/``WERK_TOKEN``.
    """

    def __init__(
        self,
        handlers: Registry | Mapping[str, Callable[..., Any]] | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        client: AsyncClient | None = None,
        config: WorkerConfig | None = None,
        middleware: Iterable[Middleware] = (),
        wid: str | None = None,
        preload: Iterable[str] = (),
        logger: logging.Logger | None = None,
        **options: Any,
    ) -> None:
        self.registry = handlers if isinstance(handlers, Registry) else Registry(handlers)
        if config is None:
            config = WorkerConfig.from_env(**options)
        elif options:
            config = replace(config, **options)
        self.config = config
        self.wid = wid or new_jid()
        self.url = client.url if client is not None else protocol.resolve_url(url)
        self._token = protocol.resolve_token(token)
        self._client = client
        self._extra_middleware = list(middleware)
        self._preload = list(preload)
        self.log = logger or logging.getLogger("werk_client.worker")
        self.processed = 0
        self.failed = 0
        self._state: WorkerState = "running"
        self._running: dict[str, _Running] = {}  # by lease
        self._loop: asyncio.AbstractEventLoop | None = None
        self._grace: float = config.grace
        self._signals = 0

    # -- registration ----------------------------------------------------------------------

    def handler(self, jobtype: str | None = None, *, with_job: bool = False) -> Callable[[F], F]:
        """Decorator registering a handler on this worker's registry."""
        return self.registry.handler(jobtype, with_job=with_job)

    def use(self, middleware: Middleware) -> Middleware:
        """Add a middleware around every job (after the registry's own)."""
        self._extra_middleware.append(middleware)
        return middleware

    # -- control (thread-safe) -------------------------------------------------------------

    @property
    def state(self) -> WorkerState:
        return self._state

    @property
    def running_jids(self) -> list[str]:
        return [run.record.jid for run in self._running.values()]

    def quiet(self) -> None:
        """Stop fetching; running jobs finish. Safe to call from any thread."""
        self._call_soon(self._enter_quiet, "quiet requested")

    def stop(self, grace: float | None = None) -> None:
        """Graceful shutdown: quiet, wait up to ``grace`` s, fail what is left, return."""
        wait = self.config.grace if grace is None else grace
        self._call_soon(self._request_shutdown, wait, "stop requested")

    def terminate(self) -> None:
        """Shutdown now: fail running jobs (they retry) and return."""
        self._call_soon(self._request_shutdown, 0.0, "terminate requested")

    def _call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is None or self._loop.is_closed():
            raise RuntimeError("the worker is not running")
        self._loop.call_soon_threadsafe(fn, *args)

    # -- running ---------------------------------------------------------------------------

    def run(self, *, handle_signals: bool = True) -> None:
        """Run until stopped (blocking). Installs SIGTERM/SIGINT handlers by default."""
        asyncio.run(self.run_async(handle_signals=handle_signals))

    async def run_async(self, *, handle_signals: bool = False) -> None:
        """Run until stopped, inside an existing event loop."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._state = "running"
        self._grace = self.config.grace
        self._signals = 0
        self._wake = asyncio.Event()  # capacity freed or state changed
        self._handling = 0  # jobs whose handler has not returned yet
        self._drained = asyncio.Event()
        self._drained.set()
        self._shutdown = asyncio.Event()
        self._grace_cut = asyncio.Event()
        self._beat_now = asyncio.Event()
        owns_client = self._client is None
        # Every long poll holds a connection; heartbeats must never queue behind them.
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=self.config.concurrency + 10
        )
        client = self._client or AsyncClient(self.url, token=self._token or "", limits=limits)
        self._client = client
        self._middleware = [*self.registry.middlewares, *self._extra_middleware]
        self._threads = DaemonThreadPool(self.config.concurrency)
        self._processes = (
            ProcessRunner(
                url=self.url,
                token=self._token,
                max_workers=self.config.concurrency,
                preload=self._preload,
            )
            if self.config.process
            else None
        )
        self._acker = AckBatcher(client) if self.config.batch_ack else None
        installed = self._install_signal_handlers(loop) if handle_signals else []
        self.log.info(
            "worker started (queues=%s concurrency=%d mode=%s jobtypes=%s)",
            ",".join(self.config.queues),
            self.config.concurrency,
            "process" if self.config.process else "thread/async",
            ",".join(self.registry.jobtypes),
            extra={"wid": self.wid},
        )
        try:
            for hook in self.registry.startup_hooks:
                await _call_hook(hook)
        except BaseException:
            await self._close(installed, owns_client)
            raise
        await self._beat_once()
        fetcher = asyncio.create_task(self._fetch_loop(), name="werk-fetch")
        beater = asyncio.create_task(self._beat_loop(), name="werk-beat")
        try:
            try:
                await self._shutdown.wait()
            except asyncio.CancelledError:
                self._grace = 0.0
                await asyncio.shield(self._shut_down(fetcher))
                raise
            await self._shut_down(fetcher)
        finally:
            for task in (fetcher, beater):
                task.cancel()
            await asyncio.gather(fetcher, beater, return_exceptions=True)
            for hook in self.registry.shutdown_hooks:
                try:
                    await _call_hook(hook)
                except Exception:
                    self.log.exception("shutdown hook %r failed", hook)
            await self._close(installed, owns_client)

    async def _close(self, installed: list[int], owns_client: bool) -> None:
        assert self._loop is not None
        for sig in installed:
            self._loop.remove_signal_handler(sig)
        self._threads.shutdown()
        if self._processes is not None:
            self._processes.close()
        if owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None
        self.log.info(
            "worker stopped (processed=%d failed=%d)",
            self.processed,
            self.failed,
            extra={"wid": self.wid},
        )

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        installed: list[int] = []
        if threading.current_thread() is not threading.main_thread():
            return installed
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError):
                pass
        return installed

    def _on_signal(self, sig: int) -> None:
        self._signals += 1
        name = signal.Signals(sig).name
        if self._signals == 1:
            self._request_shutdown(self.config.grace, f"{name} received")
        else:
            self._request_shutdown(0.0, f"{name} received again")

    # -- state changes (loop thread) -------------------------------------------------------

    def _enter_quiet(self, reason: str) -> None:
        if self._state == "running":
            self._state = "quiet"
            self.log.info(
                "quiet: no new jobs will be fetched (%s)", reason, extra={"wid": self.wid}
            )
            self._wake.set()
            self._beat_now.set()

    def _request_shutdown(self, grace: float, reason: str) -> None:
        self._enter_quiet(reason)
        if self._shutdown.is_set():
            if grace < self._grace:
                self._grace = grace
                self._grace_cut.set()
            return
        self._grace = grace
        self.log.info(
            "shutting down (%s); grace %.1fs, %d job(s) running",
            reason,
            grace,
            len(self._running),
            extra={"wid": self.wid},
        )
        self._shutdown.set()

    async def _shut_down(self, fetcher: asyncio.Task[None]) -> None:
        # Exiting: the in-flight long poll is abandoned. Should it have just leased jobs,
        # the server fails them as WorkerLost once this worker's beats stop.
        fetcher.cancel()
        await asyncio.gather(fetcher, return_exceptions=True)
        if self._running and self._grace > 0:
            waits = [
                asyncio.ensure_future(self._drained.wait()),
                asyncio.ensure_future(self._grace_cut.wait()),
            ]
            await asyncio.wait(waits, timeout=self._grace, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waits:
                waiter.cancel()
        if self._running:
            await self._fail_running()
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=30)
        self._state = "terminate"

    async def _fail_running(self) -> None:
        """Fail every unsettled running job so that it retries; then stop their tasks."""
        victims = [r for r in self._running.values() if not r.settled and not r.lost]
        for run in victims:
            run.settled = True
            if run.task is not None:
                run.task.cancel()
        report = FailureReport(
            errtype="WorkerShutdown",
            message="the worker shut down before the job finished",
            backtrace=[],
            retry_in=self.config.shutdown_retry_in,
        )
        await asyncio.gather(*(self._send_fail(run, report) for run in victims))

    # -- fetching --------------------------------------------------------------------------

    def _max_fetches(self) -> int:
        """Concurrent fetch requests: enough that small fetch sizes can fill the capacity.

        With ``fetch_size=1`` every free slot long-polls on its own (as Faktory workers do);
        with batches, one request usually takes all free capacity and a second one pipelines.
        """
        per_request = self.config.fetch_size
        return max(2, -(-self.config.concurrency // per_request))

    def _free(self) -> int:
        """Jobs the next fetch may ask for.

        A slot is taken from the fetch that asks for it until the job's handler returns; its
        ack (or failure report) goes out after that, while the slot already serves the next
        job, so one ack round trip is not added to every job's turn. Jobs whose outcome is
        still on its way count against a second ``concurrency``, so a slow server cannot make
        the worker hold ever more leases.
        """
        limit = self.config.concurrency
        return min(limit - self._handling, 2 * limit - len(self._running)) - self._requested

    async def _fetch_loop(self) -> None:
        """Keep fetch requests in flight for all free capacity, until quiet or shutdown.

        Capacity asked for by in-flight fetches counts as taken (see ``_free``). Cancelling
        this task cancels its fetches.
        """
        fetches: set[asyncio.Task[None]] = set()
        self._requested = 0
        self._fetch_failures = 0
        try:
            while self._state == "running":
                free = self._free()
                if free <= 0 or len(fetches) >= self._max_fetches():
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                count = min(free, self.config.fetch_size)
                self._requested += count
                task = asyncio.create_task(self._fetch(count), name="werk-fetch-request")
                fetches.add(task)
                task.add_done_callback(fetches.discard)
            if fetches:
                # Quiet: jobs leased by fetches already in flight are ours; run them.
                await asyncio.gather(*fetches, return_exceptions=True)
        finally:
            for task in fetches:
                task.cancel()

    async def _fetch(self, count: int) -> None:
        assert self._client is not None
        try:
            records = await self._client.fetch(
                self.config.queues, wid=self.wid, count=count, wait=self.config.fetch_wait
            )
        except WerkError as exc:
            self._fetch_failures += 1
            # Capped low: after a server restart, work should resume within seconds.
            delay = random.uniform(0.5, min(5.0, 0.5 * 2 ** min(self._fetch_failures, 4)))
            denied = isinstance(exc, Unauthorized | Forbidden)
            level = logging.ERROR if denied else logging.WARNING
            self.log.log(level, "fetch failed (%s); retrying in %.1fs", exc, delay)
            # Hold the requested capacity while backing off, so no other fetch hammers a
            # server that is down.
            await asyncio.sleep(delay)
            return
        finally:
            self._requested -= count
            self._wake.set()
        self._fetch_failures = 0
        for record in records:
            self._start(record)

    def _start(self, record: JobRecord) -> None:
        run = _Running(record, self.registry.get(record.jobtype), self)
        # Keyed by lease: the same jid may come back to this worker (after an expiry) while
        # the abandoned attempt is still winding down.
        self._running[run.lease] = run
        self._handling += 1
        self._drained.clear()
        run.task = asyncio.create_task(self._process(run), name=f"werk-job-{record.jid}")
        # Also when the task is cancelled before it ran (then none of _process runs).
        run.task.add_done_callback(lambda _: self._handled(run))

    def _handled(self, run: _Running) -> None:
        """The job's handler returned (or will never run): its slot serves the next job."""
        if run.handling:
            run.handling = False
            self._handling -= 1
            self._wake.set()

    # -- one job ---------------------------------------------------------------------------

    async def _process(self, run: _Running) -> None:
        # The lease keeper starts only once the first extension is due: most jobs end sooner,
        # and a timer costs far less than a task per job.
        keeper: asyncio.Task[None] | None = None

        def keep_lease() -> None:
            nonlocal keeper
            keeper = asyncio.create_task(self._keep_lease(run), name=f"werk-lease-{run.record.jid}")

        assert self._loop is not None
        due = self._loop.call_later(run.next_extend - time.monotonic(), keep_lease)
        report: FailureReport | None = None
        self.log.debug("job started", extra=run.fields())
        try:
            try:
                if run.handler is None:
                    report = FailureReport(
                        errtype="UnknownJobType",
                        message=f"no handler for jobtype {run.record.jobtype!r} on this worker "
                        f"(it handles: {', '.join(self.registry.jobtypes) or 'nothing'})",
                        backtrace=[],
                    )
                else:
                    await self._invoke(run, run.handler)
            except asyncio.CancelledError:
                if run.lost or run.settled:
                    return
                raise
            except BaseException as exc:
                lines = run.record.backtrace or self.config.backtrace_lines
                report = describe_failure(exc, min(lines, self.config.backtrace_lines))
            finally:
                self._handled(run)
            if run.lost or run.settled:
                return
            run.settled = True
            if report is None:
                await self._send_ack(run)
            else:
                await self._send_fail(run, report)
        finally:
            due.cancel()
            if keeper is not None:
                keeper.cancel()
            self._running.pop(run.lease, None)
            if not self._running:
                self._drained.set()
            self._wake.set()

    async def _invoke(self, run: _Running, handler: Handler) -> None:
        async def execute() -> None:
            if self._processes is not None:
                lines = min(run.record.backtrace or 10**6, self.config.backtrace_lines)
                await self._processes.run(handler, run.record, lines)
            elif handler.is_async:
                await handler.call(run.record.args, run.job)
            else:
                context = contextvars.copy_context()
                call = functools.partial(context.run, handler.call, run.record.args, run.job)
                result = await asyncio.wrap_future(self._threads.submit(call))
                if inspect.isawaitable(result):
                    await result

        chain: Callable[[], Awaitable[None]] = execute
        for middleware in reversed(self._middleware):
            chain = functools.partial(middleware, run.job, chain)
        await chain()

    def _settle_attempts(self) -> int:
        shutting_down = self._shutdown.is_set()
        return _SETTLE_ATTEMPTS_SHUTTING_DOWN if shutting_down else _SETTLE_ATTEMPTS

    async def _send_ack(self, run: _Running) -> None:
        assert self._client is not None
        duration_ms = round((time.monotonic() - run.started) * 1000, 1)
        attempts = self._settle_attempts()
        for attempt in range(attempts):
            try:
                if self._acker is not None:
                    acked = await self._acker.ack(run.record.jid, run.lease)
                else:
                    await self._client.ack(run.record.jid, run.lease)
                    acked = True
            except (LeaseLost, JobNotFound):
                acked = False
            except WerkError as exc:
                if attempt + 1 < attempts:
                    await asyncio.sleep(min(_SETTLE_BACKOFF_CAP, 0.5 * 2**attempt))
                    continue
                self.log.error(
                    "ack failed (%s); the job will run again once its lease expires",
                    exc,
                    extra=run.fields(duration_ms=duration_ms),
                )
                return
            break
        if acked:
            self.processed += 1
            self.log.info("job done", extra=run.fields(duration_ms=duration_ms))
        else:
            self.log.warning(
                "job done but its lease was lost before the ack; it may run again",
                extra=run.fields(duration_ms=duration_ms),
            )

    async def _send_fail(self, run: _Running, report: FailureReport) -> None:
        assert self._client is not None
        duration_ms = round((time.monotonic() - run.started) * 1000, 1)
        report = report.sanitized()
        attempts = self._settle_attempts()
        for attempt in range(attempts):
            try:
                result = await self._client.fail(
                    run.record.jid,
                    run.lease,
                    errtype=report.errtype,
                    message=report.message,
                    backtrace=report.backtrace,
                    retry_in=report.retry_in,
                    retry=report.retry,
                )
            except ValidationError as exc:
                if report.message == _REFUSED:
                    self.log.error("server refused the failure report: %s", exc, extra=run.fields())
                    return
                # Should never happen; still, a recorded failure beats a lost one.
                report = replace(report, message=_REFUSED, backtrace=[])
                continue
            except (LeaseLost, JobNotFound):
                self.log.warning(
                    "job failed (%s) but its lease was already lost",
                    report.errtype,
                    extra=run.fields(errtype=report.errtype),
                )
                return
            except WerkError as exc:
                if attempt + 1 < attempts:
                    await asyncio.sleep(min(_SETTLE_BACKOFF_CAP, 0.5 * 2**attempt))
                    continue
                self.log.error(
                    "could not report failure (%s); the job will retry once its lease expires",
                    exc,
                    extra=run.fields(errtype=report.errtype),
                )
                return
            self.failed += 1
            self.log.warning(
                "job failed: %s: %s",
                report.errtype,
                report.message,
                extra=run.fields(
                    errtype=report.errtype, state=result.state, duration_ms=duration_ms
                ),
            )
            return

    # -- leases ----------------------------------------------------------------------------

    def extend_interval(self, record: JobRecord) -> float:
        """Seconds between lease extensions: a fraction (< 1/2) of the job's reserve_for."""
        return max(0.2, record.reserve_for * self.config.extend_fraction)

    async def _keep_lease(self, run: _Running) -> None:
        while not (run.lost or run.settled):
            delay = run.next_extend - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            try:
                await self._extend(run)
            except (LeaseLost, JobNotFound):
                return
            except WerkError as exc:
                retry = min(5.0, self.extend_interval(run.record) / 2)
                self.log.warning("lease extension failed (%s); retrying", exc, extra=run.fields())
                run.next_extend = time.monotonic() + retry

    async def _extend(self, run: _Running, *, progress: Any = protocol.UNSET) -> None:
        assert self._client is not None
        try:
            await self._client.extend(
                run.record.jid,
                run.lease,
                reserve_for=run.record.reserve_for,
                progress=progress,
            )
        except (LeaseLost, JobNotFound) as exc:
            self._lose(run, exc)
            raise
        run.next_extend = time.monotonic() + self.extend_interval(run.record)

    def _lose(self, run: _Running, exc: WerkError) -> None:
        """The server gave the job away: stop treating it as ours (and stop its handler)."""
        if run.lost or run.settled:
            return
        run.lost = True
        self.log.warning(
            "lease lost (%s); the job is no longer ours and will not be acked",
            exc.code,
            extra=run.fields(),
        )
        if run.task is not None and run.task is not asyncio.current_task():
            run.task.cancel()
        if run.handler is not None and not run.handler.is_async and self._processes is None:
            self._threads.grow()

    # -- heartbeat -------------------------------------------------------------------------

    async def _beat_once(self) -> None:
        assert self._client is not None
        try:
            state = await self._client.beat(
                self.wid,
                hostname=socket.gethostname()[:255],
                pid=os.getpid(),
                labels=list(self.config.labels),
                current_state=self._state,
                rss_kb=_rss_kb(),
            )
        except WerkError as exc:
            self.log.warning("heartbeat failed: %s", exc, extra={"wid": self.wid})
            return
        if state == "quiet":
            self._enter_quiet("the server asked")
        elif state == "terminate":
            self._request_shutdown(0.0, "the server asked to terminate")

    async def _beat_loop(self) -> None:
        while True:
            self._beat_now.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._beat_now.wait(), self.config.beat_interval)
            await self._beat_once()
