"""Batching of acks: completed jobs are acknowledged together, without adding latency.

The first ack goes out at once; acks that complete while a request is in flight wait for it
and then go together in the next ``POST /v1/ack`` (group commit). Under load that turns
hundreds of requests into a few; when idle it is one request per job, as before. Each caller
awaits its own outcome, so a job counts as done only once the server confirmed it: nothing is
dropped if the worker stops between completing a job and the batch being sent.
"""

from __future__ import annotations

import asyncio
import logging

from .async_client import AsyncClient
from .protocol import MAX_BATCH

__all__ = ["AckBatcher"]

log = logging.getLogger("werk_client.worker")


class AckBatcher:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._pending: list[tuple[str, str, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def ack(self, jid: str, lease: str) -> bool:
        """Ack one job; True if acknowledged, False if the lease was no longer ours.

        Raises the client's error if the batch request failed (after its own retries).
        """
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        # Mark the outcome as seen even if the caller was cancelled meanwhile, so a failed
        # batch does not also produce "exception was never retrieved" noise.
        future.add_done_callback(_consume)
        self._pending.append((jid, lease, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="werk-ack-flush")
        # Shielded: a job task cancelled mid-ack must not cancel the shared batch request.
        return await asyncio.shield(future)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                result = await self._client.ack_many([(jid, lease) for jid, lease, _ in batch])
            except Exception as exc:
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            acked = set(result.acked)
            for jid, _, future in batch:
                if not future.done():
                    future.set_result(jid in acked)
            if len(batch) > 1:
                log.debug("batch ack", extra={"count": len(batch)})


def _consume(future: asyncio.Future[bool]) -> None:
    if not future.cancelled():
        future.exception()
