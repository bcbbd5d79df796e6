"""Heartbeats: the worker tells the server it lives, and obeys the state the server answers.

Beats carry what the dashboard shows (host, pid, labels, state, memory); a server that stops
hearing them declares the worker lost and hands its jobs out again. The answer may be ``quiet``
(stop fetching) or ``terminate`` (shut down now), which is how operators steer workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable

from .async_client import AsyncClient
from .errors import WerkError
from .models import WorkerState

__all__ = ["Beat"]


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


class Beat:
    """Beats every ``interval`` seconds, or at once after ``soon()`` (a state change)."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        wid: str,
        labels: tuple[str, ...],
        interval: float,
        state: Callable[[], WorkerState],
        quiet: Callable[[str], None],
        terminate: Callable[[str], None],
        log: logging.Logger,
    ) -> None:
        self._client = client
        self._wid = wid
        self._labels = list(labels)
        self._interval = interval
        self._state = state
        self._quiet = quiet
        self._terminate = terminate
        self._log = log
        self._now = asyncio.Event()

    def soon(self) -> None:
        """Beat now rather than at the next interval (so the server sees a new state)."""
        self._now.set()

    async def once(self) -> None:
        try:
            state = await self._client.beat(
                self._wid,
                hostname=socket.gethostname()[:255],
                pid=os.getpid(),
                labels=self._labels,
                current_state=self._state(),
                rss_kb=_rss_kb(),
            )
        except WerkError as exc:
            self._log.warning("heartbeat failed: %s", exc, extra={"wid": self._wid})
            return
        if state == "quiet":
            self._quiet("the server asked")
        elif state == "terminate":
            self._terminate("the server asked to terminate")

    async def loop(self) -> None:
        while True:
            self._now.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._now.wait(), self._interval)
            await self.once()
