"""Process mode: every job runs in its own child process.

A handler that segfaults, runs out of memory or calls ``os._exit`` then takes down only its
child; the worker reports that attempt as failed (errtype ``ChildProcessDied``) and carries on.
Children come from a ``forkserver`` (preloaded with the handler module), which is much faster
than ``spawn`` and, unlike a plain ``fork`` of the multi-threaded worker, cannot inherit a lock
held by another thread. Handlers must therefore be importable (module-level functions).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import multiprocessing
import signal
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from .client import Client
from .failures import FailureReport, RemoteHandlerError, describe_failure
from .job import Job
from .models import JobRecord
from .registry import Handler
from .results import sendable_result
from .threads import DaemonThreadPool

__all__ = ["ProcessRunner"]

_CHILD_DIED = "ChildProcessDied"


class _ChildLeaseControl:
    """Checkpoints from inside a child process, over a blocking client of its own."""

    def __init__(self, url: str, token: str | None, record: JobRecord) -> None:
        self._url = url
        self._token = token
        self._record = record
        self._client: Client | None = None
        self._lost = False

    @property
    def lease_lost(self) -> bool:
        return self._lost

    def checkpoint_blocking(self, progress: Any) -> None:
        from .errors import JobNotFound, LeaseLost

        if self._client is None:
            self._client = Client(self._url, token=self._token or "")
        assert self._record.lease is not None
        try:
            self._client.extend(
                self._record.jid,
                self._record.lease,
                reserve_for=self._record.reserve_for,
                progress=progress,
            )
        except (LeaseLost, JobNotFound):
            self._lost = True
            raise

    async def checkpoint(self, progress: Any) -> None:
        await asyncio.to_thread(self.checkpoint_blocking, progress)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this child if the worker dies (best effort, Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _child_main(
    conn: Connection,
    handler: Handler,
    record: JobRecord,
    url: str,
    token: str | None,
    max_lines: int,
) -> None:
    # Ctrl-C in a terminal reaches the whole process group; the worker decides, not the child.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    control = _ChildLeaseControl(url, token, record)
    job = Job(record, control, logging.getLogger("werk_client.job"))

    def timed_out(signum: int, frame: Any) -> None:
        # The worker's soft stop at the job's timeout (it kills the child after the grace).
        job._timed_out = True
        raise TimeoutError("the job's timeout passed")

    signal.signal(signal.SIGTERM, timed_out)
    report: FailureReport | None = None
    value: Any = None
    try:
        result = handler.call(record.args, job)
        if inspect.isawaitable(result):

            async def _wait() -> Any:
                return await result

            result = asyncio.run(_wait())
        # Only what JSON carries crosses back (and goes to the server).
        value = sendable_result(result)
    except BaseException as exc:
        report = describe_failure(exc, max_lines)
    finally:
        control.close()
    conn.send((report, value))
    conn.close()


def _await_child(conn: Connection, proc: Any) -> tuple[bool, FailureReport | None, Any, int | None]:
    """Blocking: the child's report and the handler's result (if it sent them) and its exit
    code."""
    sent = False
    report: FailureReport | None = None
    value: Any = None
    try:
        report, value = conn.recv()
        sent = True
    except (EOFError, OSError):
        pass
    finally:
        conn.close()
    proc.join()
    return sent, report, value, proc.exitcode


def _death_report(exitcode: int | None) -> FailureReport:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        message = f"job process was killed by {name}"
    else:
        message = f"job process exited with code {exitcode} before reporting a result"
    return FailureReport(errtype=_CHILD_DIED, message=message, backtrace=[])


class ProcessRunner:
    """Starts one child process per job and waits for it without blocking the event loop."""

    def __init__(
        self,
        *,
        url: str,
        token: str | None,
        max_workers: int,
        preload: Sequence[str] = (),
    ) -> None:
        self._url = url
        self._token = token
        self._mp = multiprocessing.get_context("forkserver")
        if preload:
            self._mp.set_forkserver_preload(list(preload))
        self._waiters = DaemonThreadPool(max_workers, name="werk-child-wait")

    async def run(
        self,
        handler: Handler,
        record: JobRecord,
        max_lines: int,
        *,
        started: Callable[[Callable[[], None]], None] | None = None,
    ) -> Any:
        """Run the job in a child and return what its handler returned (if JSON, else None);
        raise ``RemoteHandlerError`` if it failed or died.

        ``started`` receives how to ask the child to stop (SIGTERM: a ``TimeoutError`` raised
        in the handler). Cancelling this coroutine kills the child (terminate, a timeout's
        grace ran out, or the lease was lost).
        """
        reader, writer = self._mp.Pipe(duplex=False)
        proc = self._mp.Process(
            target=_child_main,
            args=(writer, handler, record, self._url, self._token, max_lines),
            name=f"werk-job-{record.jid}",
        )
        try:
            await asyncio.to_thread(proc.start)
        finally:
            writer.close()
        if started is not None:
            started(proc.terminate)
        waiting = asyncio.wrap_future(self._waiters.submit(lambda: _await_child(reader, proc)))
        try:
            sent, report, value, exitcode = await asyncio.shield(waiting)
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError, AttributeError):
                proc.kill()
            raise
        if not sent:
            raise RemoteHandlerError(_death_report(exitcode))
        if report is not None:
            raise RemoteHandlerError(report)
        return value

    def close(self) -> None:
        self._waiters.shutdown()
