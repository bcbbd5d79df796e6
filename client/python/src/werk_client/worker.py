"""``Worker``: fetches jobs, runs their handlers, and reports every outcome to the server.

One asyncio loop drives everything. The worker composes the parts and owns its life cycle
(start, quiet, shutdown, signals): ``FetchLoop`` long polls for up to the free capacity,
``Runner`` runs each job's handler (as a task, in a thread, or in a child process),
``LeaseKeeper`` extends the leases of long jobs, ``Settler`` acks or fails each job, and
``Beat`` sends heartbeats and obeys ``quiet``/``terminate``. ``RunningJobs`` is what they share.

The rule that shapes the shutdown code: a job this worker holds a lease on is never dropped
silently. It is acked, failed (so it retries), or, if the server cannot be reached, logged
with its jid and left to the server's lease expiry / lost-worker detection to retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from . import protocol
from .async_client import AsyncClient
from .beat import Beat
from .failures import FailureReport
from .fetch_loop import FetchLoop
from .lease_keeper import LeaseKeeper, extend_interval
from .models import JobRecord, WorkerState, new_jid
from .registry import Middleware, Registry
from .runner import Runner
from .running import RunningJob, RunningJobs
from .settler import Settler
from .worker_config import WorkerConfig

__all__ = ["Worker"]

F = TypeVar("F", bound=Callable[..., Any])


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    if os.environ.get("WERK_LOOP", "auto") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _call_hook(hook: Callable[[], Any]) -> None:
    result = hook()
    if inspect.isawaitable(result):
        await result


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
        self._jobs = RunningJobs()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._grace: float = config.grace
        self._signals = 0

    # -- registration ----------------------------------------------------------------------

    def handler(
        self, jobtype: str | None = None, *, with_job: bool = False, timeout: float | None = None
    ) -> Callable[[F], F]:
        """Decorator registering a handler on this worker's registry."""
        return self.registry.handler(jobtype, with_job=with_job, timeout=timeout)

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
        return [run.record.jid for run in self._jobs]

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
        """Run until stopped (blocking). Installs SIGTERM/SIGINT handlers by default.

        The loop is uvloop's when it is installed (``pip install werk-client[uvloop]``; set
        ``WERK_LOOP=asyncio`` to keep the standard one): the runtime's own work per job is
        mostly event-loop work (a task per job, callbacks), which uvloop does in C.
        """
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(self.run_async(handle_signals=handle_signals))

    async def run_async(self, *, handle_signals: bool = False) -> None:
        """Run until stopped, inside an existing event loop."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._state = "running"
        self._grace = self.config.grace
        self._signals = 0
        self._shutdown = asyncio.Event()
        self._grace_cut = asyncio.Event()
        owns_client = self._client is None
        client = self._client
        if client is None:
            client = AsyncClient(self.url, token=self._token or "")
            # Every long poll holds a connection: keep as many as may be in use at once.
            client._keep_idle(self.config.concurrency + 10)
        self._client = client
        self._compose(client, loop)
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
        await self._beat.once()
        fetcher = asyncio.create_task(self._fetcher.run(), name="werk-fetch")
        beater = asyncio.create_task(self._beat.loop(), name="werk-beat")
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

    def _compose(self, client: AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        """The parts of one run, all made before the first await so control calls find them."""
        config = self.config
        self._jobs = RunningJobs()
        self._loop_create_task = loop.create_task
        self._debug = self.log.isEnabledFor(logging.DEBUG)
        self._runner = Runner(
            self.registry,
            [*self.registry.middlewares, *self._extra_middleware],
            config,
            url=self.url,
            token=self._token,
            preload=self._preload,
            read_dependencies=client.dependencies,
        )
        self._keeper = LeaseKeeper(
            client, loop, config.extend_fraction, self.log, on_lost=self._runner.abandon
        )
        self._settler = Settler(
            client, batch_ack=config.batch_ack, shutting_down=self._shutdown.is_set, log=self.log
        )
        self._beat = Beat(
            client,
            wid=self.wid,
            labels=config.labels,
            interval=config.beat_interval,
            state=lambda: self._state,
            quiet=self._enter_quiet,
            terminate=lambda reason: self._request_shutdown(0.0, reason),
            log=self.log,
        )
        self._fetcher = FetchLoop(
            client,
            config,
            wid=self.wid,
            jobs=self._jobs,
            fetching=lambda: self._state == "running",
            start=self._start,
            log=self.log,
        )

    async def _close(self, installed: list[int], owns_client: bool) -> None:
        assert self._loop is not None
        for sig in installed:
            self._loop.remove_signal_handler(sig)
        self._runner.close()
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
            self._jobs.wake.set()
            self._beat.soon()

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
            len(self._jobs),
            extra={"wid": self.wid},
        )
        self._shutdown.set()

    async def _shut_down(self, fetcher: asyncio.Task[None]) -> None:
        # Exiting: the in-flight long poll is abandoned. Should it have just leased jobs,
        # the server fails them as WorkerLost once this worker's beats stop.
        fetcher.cancel()
        await asyncio.gather(fetcher, return_exceptions=True)
        if self._jobs and self._grace > 0:
            waits = [
                asyncio.ensure_future(self._jobs.drained.wait()),
                asyncio.ensure_future(self._grace_cut.wait()),
            ]
            await asyncio.wait(waits, timeout=self._grace, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waits:
                waiter.cancel()
        if self._jobs:
            await self._fail_running()
        tasks = [run.task for run in self._jobs if run.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=30)
        # Jobs whose handler returned count as done only once their batched ack is answered.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settler.drained(), timeout=30)
        self._state = "terminate"

    async def _fail_running(self) -> None:
        """Fail every unsettled running job so that it retries; then stop their tasks."""
        victims = [run for run in self._jobs if not run.done]
        for run in victims:
            run.settled = True
            if run.task is not None:
                run.task.cancel()
            # A task cancelled before its first step runs none of ``_process``.
            self._jobs.handled(run)
        report = FailureReport(
            errtype="WorkerShutdown",
            message="the worker shut down before the job finished",
            backtrace=[],
            retry_in=self.config.shutdown_retry_in,
        )
        failed = await asyncio.gather(*(self._settler.fail(run, report) for run in victims))
        self.failed += sum(failed)

    # -- one job ---------------------------------------------------------------------------

    def _start(self, record: JobRecord) -> None:
        run = RunningJob(record, self.registry.get(record.jobtype), self._keeper, self.log)
        self._jobs.add(run)
        run.task = self._loop_create_task(self._process(run))

    async def _process(self, run: RunningJob) -> None:
        keeper = self._keeper
        keeper.watch(run)
        if self._debug:
            self.log.debug("job started", extra=run.fields())
        waiting_for_ack = False
        try:
            try:
                report = await self._runner.run(run)
            except asyncio.CancelledError:
                if run.lost or run.settled:
                    return
                raise
            finally:
                self._jobs.handled(run)
            if run.lost or run.settled:
                return
            run.settled = True
            if report is None:
                if self._settler.batching:
                    # Settled when the batch's answer arrives; until then the job still counts
                    # against the second ``concurrency`` and the worker's exit waits for it.
                    self._settler.ack_soon(run, self._acked)
                    waiting_for_ack = True
                elif await self._settler.ack(run):
                    self.processed += 1
            elif await self._settler.fail(run, report):
                self.failed += 1
        finally:
            if not waiting_for_ack:
                keeper.release(run)
                self._jobs.remove(run)

    def _acked(self, run: RunningJob, acked: bool) -> None:
        if acked:
            self.processed += 1
        self._keeper.release(run)
        self._jobs.remove(run)

    # -- leases ----------------------------------------------------------------------------

    def extend_interval(self, record: JobRecord) -> float:
        """Seconds between lease extensions: a fraction (< 1/2) of the job's reserve_for."""
        return extend_interval(record, self.config.extend_fraction)
