"""Group commit: requests that arrive while a statement is in flight are written together by the
next one, so N concurrent pushes (or acks) cost one round trip and one commit instead of N.
Nothing waits on a timer: with no statement in flight, a request is written at once; each caller
is answered only after its own commit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    def __init__(
        self,
        write: Callable[[Sequence[T]], Awaitable[Sequence[R | Exception]]],
        *,
        max_items: int,
        weight: Callable[[T], int] = lambda _: 1,
    ) -> None:
        """``write`` stores items and returns one result per item, in order: a value, or the
        exception that item's caller should get. One write takes items up to ``max_items`` of
        ``weight`` in all (an item that weighs more goes alone), so a statement's arrays stay
        bounded when each item is itself a batch."""
        self._write = write
        self._max_items = max_items
        self._weight = weight
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flushing is None:
            self._flushing = asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._take()]
                del self._pending[: len(batch)]
                try:
                    results = await self._write([item for item, _ in batch])
                except BaseException as exc:  # every caller of this batch hears of it
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._flushing = None

    def _take(self) -> int:
        """How many of the pending items the next write takes (at least one)."""
        total = 0
        for n, (item, _) in enumerate(self._pending):
            total += self._weight(item)
            if total > self._max_items:
                return max(n, 1)
        return len(self._pending)
