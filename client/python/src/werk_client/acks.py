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
from typing import Any

from .async_client import AsyncClient
from .errors import ResultTooLarge
from .protocol import MAX_BATCH

__all__ = ["AckBatcher"]

# An ack waiting to go: jid, lease, result (None: none) and its caller's outcome.
_Pending = tuple[str, str, Any, "asyncio.Future[bool]"]

log = logging.getLogger("werk_client.worker")


class AckBatcher:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None

    async def ack(self, jid: str, lease: str, result: Any = None) -> bool:
        """Ack one job (with its ``result``, if not None); True if acknowledged, False if the
        lease was no longer ours.

        Raises the client's error if the batch request failed (after its own retries); a result
        too large fails its own ack only.
        """
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        # Mark the outcome as seen even if the caller was cancelled meanwhile, so a failed
        # batch does not also produce "exception was never retrieved" noise.
        future.add_done_callback(_consume)
        self._pending.append((jid, lease, result, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="werk-ack-flush")
        # Shielded: a job task cancelled mid-ack must not cancel the shared batch request.
        return await asyncio.shield(future)

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                answer = await self._client.ack_many([item[:3] for item in batch])
            except ResultTooLarge as exc:
                if len(batch) == 1:
                    _fail_all(batch, exc)
                else:  # one result refused the whole batch: each goes alone, failing alone
                    await asyncio.gather(*(self._ack_alone(item) for item in batch))
                continue
            except Exception as exc:
                _fail_all(batch, exc)
                continue
            acked = set(answer.acked)
            for jid, _, _, future in batch:
                if not future.done():
                    future.set_result(jid in acked)
            if len(batch) > 1:
                log.debug("batch ack", extra={"count": len(batch)})

    async def _ack_alone(self, item: _Pending) -> None:
        jid, lease, result, future = item
        try:
            answer = await self._client.ack_many([(jid, lease, result)])
        except Exception as exc:
            _fail_all([item], exc)
        else:
            if not future.done():
                future.set_result(jid in answer.acked)


def _fail_all(batch: list[_Pending], exc: Exception) -> None:
    for *_, future in batch:
        if not future.done():
            future.set_exception(exc)


def _consume(future: asyncio.Future[bool]) -> None:
    if not future.cancelled():
        future.exception()
