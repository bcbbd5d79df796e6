"""Keeping running jobs' leases: extended before they expire, given up when the server says so.

A lease is extended once ``extend_fraction`` (below one half) of its ``reserve_for`` has passed;
a failed extension is retried well before the lease runs out.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from . import protocol
from .async_client import AsyncClient
from .errors import JobNotFound, LeaseLost, WerkError
from .models import JobRecord
from .running import RunningJob

__all__ = ["LeaseKeeper", "extend_interval"]


def extend_interval(record: JobRecord, fraction: float) -> float:
    """Seconds between lease extensions: ``fraction`` of the job's reserve_for."""
    return max(0.2, record.reserve_for * fraction)


class LeaseKeeper:
    """Extends the leases of running jobs on time and notices when one is lost.

    ``on_lost`` is told about a job taken away while its handler may still be running.
    """

    def __init__(
        self,
        client: AsyncClient,
        loop: asyncio.AbstractEventLoop,
        fraction: float,
        log: logging.Logger,
        on_lost: Callable[[RunningJob], None],
    ) -> None:
        self._client = client
        self.loop = loop
        self._fraction = fraction
        self._log = log
        self._on_lost = on_lost
        self._watched: dict[RunningJob, None] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._due = math.inf

    def interval(self, record: JobRecord) -> float:
        return extend_interval(record, self._fraction)

    def watch(self, run: RunningJob) -> None:
        """Keep ``run``'s lease until ``release``.

        One timer serves every watched job, set for the earliest extension due; a job gets a
        task of its own only once its first extension is due, which most jobs never reach.
        """
        self._watched[run] = None
        if run.next_extend < self._due:
            self._wake_at(run.next_extend)

    def release(self, run: RunningJob) -> None:
        self._watched.pop(run, None)
        if run.keeping is not None:
            run.keeping.cancel()

    def _wake_at(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._due = when
        self._timer = self.loop.call_later(max(0.0, when - time.monotonic()), self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        self._due = math.inf
        now = time.monotonic()
        earliest = math.inf
        for run in self._watched:
            if run.done or run.keeping is not None:
                continue
            if run.next_extend <= now:
                run.keeping = self.loop.create_task(
                    self._keep_lease(run), name=f"werk-lease-{run.record.jid}"
                )
            else:
                earliest = min(earliest, run.next_extend)
        if earliest < math.inf:
            self._wake_at(earliest)

    async def _keep_lease(self, run: RunningJob) -> None:
        while not run.done:
            delay = run.next_extend - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            try:
                await self.extend(run)
            except (LeaseLost, JobNotFound):
                return
            except WerkError as exc:
                retry = min(5.0, self.interval(run.record) / 2)
                self._log.warning("lease extension failed (%s); retrying", exc, extra=run.fields())
                run.next_extend = time.monotonic() + retry

    async def extend(self, run: RunningJob, *, progress: Any = protocol.UNSET) -> None:
        """Extend now (storing ``progress`` if given); raises ``LeaseLost`` if it is gone."""
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
        run.next_extend = time.monotonic() + self.interval(run.record)

    def _lose(self, run: RunningJob, exc: WerkError) -> None:
        """The server gave the job away: stop treating it as ours (and stop its handler)."""
        if run.done:
            return
        run.lost = True
        self._log.warning(
            "lease lost (%s); the job is no longer ours and will not be acked",
            exc.code,
            extra=run.fields(),
        )
        if run.task is not None and run.task is not asyncio.current_task():
            run.task.cancel()
        self._on_lost(run)
