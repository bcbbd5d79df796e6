"""``Job``: what a handler sees of the job it is running.

Besides the data (``args``, ``jid``, ``attempt``), it carries the one capability a long job
needs: ``checkpoint(progress)``, which extends the lease *and* stores ``progress`` on the
server. If the worker dies, the next attempt starts with ``job.progress`` set to the last
checkpoint, so it can resume instead of starting over.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from .models import Dependencies, JobRecord

__all__ = ["Job", "LeaseControl"]


class LeaseControl(Protocol):
    """How a ``Job`` reaches the server; differs between threads/tasks and child processes."""

    async def checkpoint(self, progress: Any) -> None: ...

    def checkpoint_blocking(self, progress: Any) -> None: ...

    @property
    def lease_lost(self) -> bool: ...


class Job:
    """The running job, handed to handlers that ask for it (see ``Registry``)."""

    def __init__(self, record: JobRecord, control: LeaseControl, logger: logging.Logger) -> None:
        self.record = record
        self._control = control
        self._progress: Any = record.progress
        self._logger = logger
        self._log: logging.LoggerAdapter[logging.Logger] | None = None
        # Set once by the worker's loop (or the child's signal handler) and only polled: a
        # plain flag does, without a lock and condition for every job.
        self._timed_out = False

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose lines carry the job's jid, jobtype and attempt."""
        if self._log is None:
            record = self.record
            self._log = logging.LoggerAdapter(
                self._logger,
                {"jid": record.jid, "jobtype": record.jobtype, "attempt": record.attempt},
            )
        return self._log

    @property
    def jid(self) -> str:
        return self.record.jid

    @property
    def jobtype(self) -> str:
        return self.record.jobtype

    @property
    def args(self) -> list[Any]:
        return self.record.args

    @property
    def queue(self) -> str:
        return self.record.queue

    @property
    def custom(self) -> dict[str, Any]:
        return self.record.custom

    @property
    def attempt(self) -> int:
        """Which attempt this is, as counted by the server."""
        return self.record.attempt

    @property
    def progress(self) -> Any:
        """The last checkpoint: from a previous attempt at start, then this attempt's own."""
        return self._progress

    @property
    def dependencies(self) -> Dependencies:
        """The jobs this one depended on (pushed with ``depends_on``), by jid and by ref, each
        with how it ended and its result: ``job.dependencies["extract"].result``, or
        ``job.dependencies.results()`` for every completed one's. Empty for other jobs."""
        return Dependencies(self.record.dependencies or ())

    @property
    def batch(self) -> str | None:
        """The bid of the batch this job is a member of (None: none); a handler adds work to
        it with ``client.open_batch(job.batch)``."""
        return self.record.batch

    @property
    def lease_lost(self) -> bool:
        """True once the server gave the job to someone else; further work is wasted."""
        return self._control.lease_lost

    @property
    def timed_out(self) -> bool:
        """True once the job's timeout passed: stop and return (or raise), the attempt fails
        with ``Timeout`` anyway. Plain (thread) handlers poll it, since a thread cannot be
        interrupted; ``async def`` handlers are cancelled instead."""
        return self._timed_out

    def checkpoint(self, progress: Any) -> None:
        """Record ``progress`` (any JSON value) and extend the lease; blocks until stored.

        For plain (thread or process) handlers. Raises ``LeaseLost`` if the job is no longer
        ours. In ``async def`` handlers use ``await job.acheckpoint(progress)``.
        """
        self._control.checkpoint_blocking(progress)
        self._progress = progress

    async def acheckpoint(self, progress: Any) -> None:
        """``checkpoint`` for ``async def`` handlers."""
        await self._control.checkpoint(progress)
        self._progress = progress

    def __repr__(self) -> str:
        return f"<Job {self.jobtype} jid={self.jid} attempt={self.attempt}>"
