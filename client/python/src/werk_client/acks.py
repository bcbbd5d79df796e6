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
from typing import Any, Generic, TypeVar

from .errors import PayloadTooLarge, ValidationError
from .models import AckManyResult
from .protocol import MAX_BATCH

__all__ = ["AckBatcher"]

log = logging.getLogger("werk_client.worker")

T = TypeVar("T")

# (jid, lease) or (jid, lease, result) items -> the server's answer, retried as the caller
# sees fit.
SendBatch = Callable[[Sequence[tuple[Any, ...]]], Awaitable[AckManyResult]]
# A result the server refuses (too large, not storable) refuses its whole batch, as does a
# batch whose results together exceed the server's body limit.
_REFUSED_RESULT = (PayloadTooLarge, ValidationError)


class AckBatcher(Generic[T]):
    """Collects ``(jid, lease, result, item)`` and acks them in batches; ``on_outcome(item,
    acked, error)`` is called for each: acked or not (its lease was no longer ours), or the
    error that stopped the batch. A result the server refuses is logged and its job acked
    without it (so the job does not run again for want of a result); a batch over the server's
    body limit is sent again in halves."""

    def __init__(
        self,
        send: SendBatch,
        on_outcome: Callable[[T, bool, Exception | None], None],
    ) -> None:
        self._send = send
        self._on_outcome = on_outcome
        self._pending: list[tuple[str, str, Any, T]] = []
        self._flusher: asyncio.Task[None] | None = None

    def add(self, jid: str, lease: str, result: Any, item: T) -> None:
        self._pending.append((jid, lease, result, item))
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
                await self._ack(batch)
                if len(batch) > 1 and log.isEnabledFor(logging.DEBUG):
                    log.debug("batch ack", extra={"count": len(batch)})
        finally:
            self._flusher = None

    async def _ack(self, batch: list[tuple[str, str, Any, T]]) -> None:
        try:
            answer = await self._send(
                [
                    (jid, lease) if result is None else (jid, lease, result)
                    for jid, lease, result, _ in batch
                ]
            )
        except _REFUSED_RESULT as exc:
            if len(batch) > 1 and any(result is not None for _, _, result, _ in batch):
                # In halves, down to the refused result's own job, which alone loses it; halves
                # also bring a batch too large as a whole under the body limit.
                middle = len(batch) // 2
                await self._ack(batch[:middle])
                await self._ack(batch[middle:])
            elif batch[0][2] is not None:
                jid, lease, _, item = batch[0]
                log.error(
                    "the server refused the result of job %s (%s); acking without it", jid, exc
                )
                await self._ack([(jid, lease, None, item)])
            else:
                self._on_outcome(batch[0][3], False, exc)
            return
        except Exception as exc:
            for *_, item in batch:
                self._on_outcome(item, False, exc)
            return
        acked = set(answer.acked)
        for jid, _, _, item in batch:
            self._on_outcome(item, jid in acked, None)
