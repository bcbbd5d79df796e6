"""Batching of acks: completed jobs are acknowledged together, without adding latency.

The first ack goes out at once; acks that complete while a request is in flight wait for it
and then go together in the next ``POST /v1/ack`` (group commit). Under load that turns
hundreds of requests into a few; when idle it is one request per job. Each job's outcome is
reported to ``on_outcome`` only once the server answered, so a job counts as done only once the
server confirmed it: nothing is dropped if the worker stops between completing a job and the
batch being sent (the worker waits for ``drained`` before it exits).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from .models import AckManyResult
from .protocol import MAX_BATCH

__all__ = ["AckBatcher"]

log = logging.getLogger("werk_client.worker")

T = TypeVar("T")

# (jid, lease) pairs -> the server's answer, retried as the caller sees fit.
SendBatch = Callable[[Sequence[tuple[str, str]]], Awaitable[AckManyResult]]


class AckBatcher(Generic[T]):
    """Collects ``(jid, lease, item)`` and acks them in batches; ``on_outcome(item, acked,
    error)`` is called for each: acked or not (its lease was no longer ours), or the error
    that stopped the batch."""

    def __init__(
        self,
        send: SendBatch,
        on_outcome: Callable[[T, bool, Exception | None], None],
    ) -> None:
        self._send = send
        self._on_outcome = on_outcome
        self._pending: list[tuple[str, str, T]] = []
        self._flusher: asyncio.Task[None] | None = None

    def add(self, jid: str, lease: str, item: T) -> None:
        self._pending.append((jid, lease, item))
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(
                self._flush(), name="werk-ack-flush"
            )

    async def drained(self) -> None:
        """Wait until every ack added so far has its outcome."""
        while self._flusher is not None:
            await asyncio.shield(self._flusher)

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                try:
                    result = await self._send([(jid, lease) for jid, lease, _ in batch])
                except Exception as exc:
                    for _, _, item in batch:
                        self._on_outcome(item, False, exc)
                    continue
                acked = set(result.acked)
                for jid, _, item in batch:
                    self._on_outcome(item, jid in acked, None)
                if len(batch) > 1 and log.isEnabledFor(logging.DEBUG):
                    log.debug("batch ack", extra={"count": len(batch)})
        finally:
            self._flusher = None
