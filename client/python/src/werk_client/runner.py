"""Running a job's handler inside the middleware chain, and turning its outcome into a report.

``async def`` handlers run as tasks on the worker's loop, plain ones on daemon threads (see
``threads``), and with ``process`` every job runs in a child process of its own (see
``process_mode``). A job with a timeout runs as a task of its own, watched (see ``timeouts``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from .failures import FailureReport, describe_failure
from .job import Job
from .models import Dependency, JobRecord
from .process_mode import ProcessRunner
from .registry import Handler, Middleware, Registry
from .results import sendable_result
from .running import RunningJob
from .threads import DaemonThreadPool, LoopHandoff
from .timeouts import TIMEOUT_ERRTYPE, check_timeout, custom_timeout
from .worker_config import WorkerConfig

__all__ = ["Runner"]


class Runner:
    """Runs handlers for a worker; ``close`` once the worker stops."""

    def __init__(
        self,
        registry: Registry,
        middleware: Sequence[Middleware],
        config: WorkerConfig,
        *,
        url: str,
        token: str | None,
        preload: Sequence[str],
        read_dependencies: Callable[..., Awaitable[list[Dependency]]],
    ) -> None:
        self._registry = registry
        self._read_dependencies = read_dependencies
        self._middleware = list(middleware)
        self._backtrace_lines = config.backtrace_lines
        self._timeout_grace = config.timeout_grace
        self._threads = DaemonThreadPool(config.concurrency)
        self._handoff: LoopHandoff | None = None
        self._processes = (
            ProcessRunner(url=url, token=token, max_workers=config.concurrency, preload=preload)
            if config.process
            else None
        )

    async def run(self, run: RunningJob) -> FailureReport | None:
        """Run the job's handler: None if it returned (what it returned, if JSON, is then
        ``run.result``), else what to report as its failure.

        Cancellation (shutdown, lost lease) propagates.
        """
        if run.handler is None:
            return FailureReport(
                errtype="UnknownJobType",
                message=f"no handler for jobtype {run.record.jobtype!r} on this worker "
                f"(it handles: {', '.join(self._registry.jobtypes) or 'nothing'})",
                backtrace=[],
            )
        try:
            timeout = self._timeout(run, run.handler)
        except ValueError as exc:
            # Pushed around the SDK's check: it can never run within its reservation.
            return FailureReport(
                errtype="InvalidTimeout", message=str(exc), backtrace=[], retry=False
            )
        handler = run.handler
        deps = run.record.dependencies
        if deps is not None and (
            run.record.dependencies_omitted or any(d.result_omitted for d in deps)
        ):
            try:
                run.record = await self._with_every_result(run.record, deps)
            except Exception as exc:  # the attempt fails and is retried, as a handler's would
                return describe_failure(exc, self._max_lines(run))
        # What the handler and the middleware see of the job, built only for them, and held by
        # this call rather than by ``run``: the job refers to ``run``, and a reference back
        # would make every finished job a cycle that only the garbage collector frees.
        job = Job(run.record, run, run.log) if self._middleware or handler.style != "args" else None
        if timeout is None:
            return await self._run(run, handler, job)
        return await self._run_within(run, handler, job, timeout)

    async def _with_every_result(self, record: JobRecord, deps: list[Dependency]) -> JobRecord:
        """The record with the dependencies and results its fetch answer left out, read from
        the job's dependency pages from the first result left out on (or, when every listed
        result is there, after the last dependency listed)."""
        first = next((i for i, d in enumerate(deps) if d.result_omitted), len(deps))
        read = await self._read_dependencies(
            record.jid, after=deps[first - 1].jid if first else None
        )
        by_jid = {d.jid: d for d in read}
        missing = [d.jid for d in deps[first:] if d.result_omitted and d.jid not in by_jid]
        if missing:
            raise LookupError(f"dependencies {missing[:10]} are not in the job's dependency pages")
        # The pages hold every dependency from there on: the ones listed, with their results,
        # and any the answer did not list.
        return replace(record, dependencies=[*deps[:first], *read], dependencies_omitted=False)

    @staticmethod
    def _timeout(run: RunningJob, handler: Handler) -> float | None:
        """The job's ``custom.timeout`` if it has one, else its handler's (None: no limit)."""
        timeout = custom_timeout(run.record.custom)
        if timeout is None:
            return handler.timeout
        return check_timeout(timeout, run.record.reserve_for, where=f"job {run.record.jid}")

    async def _run_within(
        self, run: RunningJob, handler: Handler, job: Job | None, limit: float
    ) -> FailureReport | None:
        """``_run`` limited to ``limit`` seconds, then asked to stop; failed with ``Timeout``
        after ``timeout_grace`` more seconds whether it stopped or not."""
        task = asyncio.ensure_future(self._run(run, handler, job))
        try:
            done, _ = await asyncio.wait((task,), timeout=limit)
            if done:
                return task.result()
            if job is not None:  # a handler without it cannot look
                job._timed_out = True
            if run.interrupt is not None:
                run.interrupt()  # the job's child process: SIGTERM
            elif handler.is_async:
                task.cancel()
            # A thread handler cannot be interrupted: it has the grace period to notice
            # ``job.timed_out`` and return.
            await asyncio.wait((task,), timeout=self._timeout_grace)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.done():
            if not task.cancelled():
                task.exception()  # whatever it ended with, the attempt timed out
        else:
            # Still running: the child is killed; a task that swallowed its cancellation or a
            # thread runs on, without its slot.
            task.cancel()
            self.abandon(run)
        return FailureReport(
            errtype=TIMEOUT_ERRTYPE,
            message=f"the handler ran past its timeout of {limit:g}s",
            backtrace=[],
        )

    async def _run(
        self, run: RunningJob, handler: Handler, job: Job | None
    ) -> FailureReport | None:
        if not self._middleware and self._processes is None:
            try:
                if handler.is_async:
                    value = await handler.call(run.record.args, job)
                else:
                    value = await self._in_thread(handler, run, job)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                return describe_failure(exc, self._max_lines(run))
            if value is not None:
                run.result = sendable_result(value, run.fields())
            return None

        async def execute() -> None:
            value: Any
            if self._processes is not None:
                value = await self._processes.run(
                    handler, run.record, self._max_lines(run), started=run.interrupted_by
                )
            elif handler.is_async:
                value = await handler.call(run.record.args, job)
            else:
                value = await self._in_thread(handler, run, job)
            if value is not None:
                run.result = sendable_result(value, run.fields())

        chain: Callable[[], Awaitable[None]] = execute
        if job is not None:
            for middleware in reversed(self._middleware):
                chain = functools.partial(middleware, job, chain)
        try:
            await chain()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            return describe_failure(exc, self._max_lines(run))
        return None

    async def _in_thread(self, handler: Handler, run: RunningJob, job: Job | None) -> Any:
        """A plain handler on the thread pool, with the caller's context variables; what it
        returned."""
        loop = asyncio.get_running_loop()
        if self._handoff is None:
            self._handoff = LoopHandoff(loop)
        context = contextvars.copy_context()
        call = functools.partial(context.run, handler.call, run.record.args, job)
        future: asyncio.Future[Any] = loop.create_future()
        self._threads.run_for(call, future, self._handoff)
        result = await future
        if inspect.isawaitable(result):
            result = await result
        return result

    def _max_lines(self, run: RunningJob) -> int:
        """Backtrace lines to send: the job's own limit, within the worker's."""
        return min(run.record.backtrace or self._backtrace_lines, self._backtrace_lines)

    def abandon(self, run: RunningJob) -> None:
        """The job was taken away while its handler runs: a thread cannot be stopped, so the
        pool grows by one rather than let it hold a slot a new job needs."""
        if run.handler is not None and not run.handler.is_async and self._processes is None:
            self._threads.grow()

    def close(self) -> None:
        self._threads.shutdown()
        if self._processes is not None:
            self._processes.close()
