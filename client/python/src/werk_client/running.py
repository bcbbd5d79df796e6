"""The jobs a worker holds leases on, from fetch until each is settled or lost.

A job takes a slot from the fetch that asks for it until its handler returns; its ack (or
failure report) goes out after that, while the slot already serves the next job, so one ack
round trip is not added to every job's turn. Jobs whose outcome is still on its way count
against a second ``concurrency``, so a slow server cannot make the worker hold ever more leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .models import JobRecord
from .registry import Handler

if TYPE_CHECKING:
    from .lease_keeper import LeaseKeeper

__all__ = ["RunningJob", "RunningJobs"]


class RunningJob:
    """One job this worker holds a lease on, from fetch until it is settled or lost.

    Also the job's ``LeaseControl``: checkpoints go through the lease keeper on the worker's
    loop.
    """

    __slots__ = (
        "handler",
        "handling",
        "interrupt",
        "keeper",
        "keeping",
        "log",
        "lost",
        "next_extend",
        "record",
        "result",
        "settled",
        "started",
        "task",
    )

    def __init__(
        self,
        record: JobRecord,
        handler: Handler | None,
        keeper: LeaseKeeper,
        log: logging.Logger,
    ) -> None:
        self.record = record
        self.handler = handler
        self.handling = True  # holds a slot until its handler returns (RunningJobs.handled)
        self.keeper = keeper
        self.keeping: asyncio.Task[None] | None = None  # extending the lease, once due
        self.settled = False
        self.result: Any = None  # what the handler returned, if JSON (sent with the ack)
        self.lost = False
        self.started = time.monotonic()
        self.next_extend = self.started + keeper.interval(record)
        self.task: asyncio.Task[None] | None = None
        self.interrupt: Callable[[], None] | None = None  # asks its child process to stop
        self.log = log  # for the ``Job`` the runner builds

    def interrupted_by(self, stop: Callable[[], None]) -> None:
        self.interrupt = stop

    @property
    def lease(self) -> str:
        assert self.record.lease is not None, "fetched jobs always carry a lease"
        return self.record.lease

    @property
    def lease_lost(self) -> bool:
        return self.lost

    @property
    def done(self) -> bool:
        """Settled or lost: nothing more is to be reported for it."""
        return self.lost or self.settled

    async def checkpoint(self, progress: Any) -> None:
        await self.keeper.extend(self, progress=progress)

    def checkpoint_blocking(self, progress: Any) -> None:
        loop = self.keeper.loop
        if loop.is_closed():
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


class RunningJobs:
    """The running jobs by lease, with the counts the fetch loop sizes its requests by.

    Keyed by lease: the same jid may come back to this worker (after an expiry) while the
    abandoned attempt is still winding down. ``wake`` is set whenever a slot frees up (and
    by the worker when its state changes): the fetch loop waits on it.
    """

    def __init__(self) -> None:
        self._by_lease: dict[str, RunningJob] = {}
        self.handling = 0  # jobs whose handler has not returned yet
        self.wake = asyncio.Event()
        self.drained = asyncio.Event()
        self.drained.set()

    def __len__(self) -> int:
        return len(self._by_lease)

    def __iter__(self) -> Iterator[RunningJob]:
        return iter(list(self._by_lease.values()))

    def add(self, run: RunningJob) -> None:
        self._by_lease[run.lease] = run
        self.handling += 1
        self.drained.clear()

    def handled(self, run: RunningJob) -> None:
        """The job's handler returned (or will never run): its slot serves the next job."""
        if run.handling:
            run.handling = False
            self.handling -= 1
            self.wake.set()

    def remove(self, run: RunningJob) -> None:
        """The job is settled or lost: it no longer counts against the second ``concurrency``."""
        self._by_lease.pop(run.lease, None)
        if not self._by_lease:
            self.drained.set()
        self.wake.set()
