"""The fetch loop: long polls in flight for all the capacity the running jobs leave free.

With ``fetch_size=1`` every free slot long-polls on its own (as Faktory workers do); with
batches, one request usually takes all free capacity and a second one pipelines.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from .async_client import AsyncClient
from .errors import Forbidden, Unauthorized, WerkError
from .models import JobRecord
from .running import RunningJobs
from .worker_config import WorkerConfig

__all__ = ["FetchLoop"]


class FetchLoop:
    """Fetches while ``fetching()`` holds and hands every leased job to ``start``.

    Capacity asked for by fetches in flight counts as taken; ``jobs.wake`` is set whenever
    capacity frees up or ``fetching()`` may have changed.
    """

    def __init__(
        self,
        client: AsyncClient,
        config: WorkerConfig,
        *,
        wid: str,
        jobs: RunningJobs,
        fetching: Callable[[], bool],
        start: Callable[[JobRecord], None],
        log: logging.Logger,
    ) -> None:
        self._client = client
        self._config = config
        self._concurrency = config.concurrency
        self._fetch_size = config.fetch_size
        self._fetch_wait = config.fetch_wait
        self._wid = wid
        self._jobs = jobs
        self._fetching = fetching
        self._start = start
        self._log = log
        self._requested = 0
        self._failures = 0
        # Enough concurrent requests that small fetch sizes can fill the capacity.
        self._max_fetches = max(2, -(-self._concurrency // self._fetch_size))
        # With a fetch already in flight, the next one waits for half a batch of free capacity:
        # jobs that finish one by one would otherwise each send a fetch for one or two jobs.
        self._batch_floor = max(1, min(self._fetch_size, self._concurrency) // 2)

    def _free(self) -> int:
        """Jobs the next fetch may ask for (see ``running`` for the two limits)."""
        limit = self._concurrency
        jobs = self._jobs
        return min(limit - jobs.handling, 2 * limit - len(jobs)) - self._requested

    async def run(self) -> None:
        """Keep fetch requests in flight until ``fetching()`` turns false.

        Then the fetches already in flight are awaited: jobs they lease are ours to run.
        Cancelling this task cancels its fetches.
        """
        fetches: set[asyncio.Task[None]] = set()
        wake = self._jobs.wake
        try:
            while self._fetching():
                free = self._free()
                floor = self._batch_floor if fetches else 1
                if free < floor or len(fetches) >= self._max_fetches:
                    wake.clear()
                    await wake.wait()
                    continue
                count = min(free, self._fetch_size)
                self._requested += count
                task = asyncio.create_task(self._fetch(count), name="werk-fetch-request")
                fetches.add(task)
                task.add_done_callback(fetches.discard)
            if fetches:
                await asyncio.gather(*fetches, return_exceptions=True)
        finally:
            for task in fetches:
                task.cancel()

    async def _fetch(self, count: int) -> None:
        try:
            records = await self._client.fetch(
                self._config.queue_order(), wid=self._wid, count=count, wait=self._fetch_wait
            )
        except WerkError as exc:
            self._failures += 1
            # Capped low: after a server restart, work should resume within seconds.
            delay = random.uniform(0.5, min(5.0, 0.5 * 2 ** min(self._failures, 4)))
            denied = isinstance(exc, Unauthorized | Forbidden)
            level = logging.ERROR if denied else logging.WARNING
            self._log.log(level, "fetch failed (%s); retrying in %.1fs", exc, delay)
            # Hold the requested capacity while backing off, so no other fetch hammers a
            # server that is down.
            await asyncio.sleep(delay)
            return
        finally:
            self._requested -= count
            self._jobs.wake.set()
        self._failures = 0
        for record in records:
            self._start(record)
