"""Settling jobs: acking the ones whose handler returned, failing the others so they retry.

A job this worker holds a lease on is never dropped silently: when the server cannot be reached
the outcome is retried for a while, then logged with its jid, and the server's lease expiry or
lost-worker detection retries the job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from .acks import AckBatcher
from .async_client import AsyncClient
from .errors import JobNotFound, LeaseLost, PayloadTooLarge, ValidationError, WerkError
from .failures import FailureReport
from .models import AckManyResult, FailResult
from .running import RunningJob

__all__ = ["Settler"]

T = TypeVar("T")
_Waiting = tuple[RunningJob, Callable[[RunningJob, bool], None]]

# Tries to deliver an ack/fail when the server is unreachable (each try already retried by the
# client).
_ATTEMPTS = 6
_ATTEMPTS_SHUTTING_DOWN = 3
_BACKOFF_CAP = 10.0
_REFUSED = "(the failure details were refused by the server)"


class Settler:
    """Sends acks (batched unless ``batch_ack`` is off) and failure reports.

    ``ack`` and ``fail`` answer whether the server recorded the outcome, which is what the
    worker counts as processed or failed.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        batch_ack: bool,
        shutting_down: Callable[[], bool],
        log: logging.Logger,
    ) -> None:
        self._client = client
        self._acker: AckBatcher[_Waiting] | None = (
            AckBatcher(self._send_acks, self._ack_outcome) if batch_ack else None
        )
        self._shutting_down = shutting_down
        self._log = log

    async def _try_hard(self, send: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``send(*args)``, tried again after a backoff while the server cannot be reached.

        Raises the last error once the attempts are spent (fewer while shutting down, so an
        outage cannot hold the exit for long), and at once what retrying cannot change.
        """
        attempts = _ATTEMPTS_SHUTTING_DOWN if self._shutting_down() else _ATTEMPTS
        for attempt in range(attempts - 1):
            try:
                return await send(*args)
            except (LeaseLost, JobNotFound, ValidationError, PayloadTooLarge):
                raise
            except WerkError:
                await asyncio.sleep(min(_BACKOFF_CAP, 0.5 * 2**attempt))
        return await send(*args)

    @property
    def batching(self) -> bool:
        return self._acker is not None

    async def _send_acks(self, items: Sequence[tuple[Any, ...]]) -> AckManyResult:
        return await self._try_hard(self._client.ack_many, items)

    def ack_soon(self, run: RunningJob, settled: Callable[[RunningJob, bool], None]) -> None:
        """Batched ack: ``settled(run, acked)`` once the server answered (or gave up)."""
        assert self._acker is not None
        self._acker.add(run.record.jid, run.lease, run.result, (run, settled))

    def _ack_outcome(self, waiting: _Waiting, acked: bool, error: Exception | None) -> None:
        run, settled = waiting
        settled(run, self._report_ack(run, acked, error))

    async def drained(self) -> None:
        """Wait until every batched ack has its answer."""
        if self._acker is not None:
            await self._acker.drained()

    async def ack(self, run: RunningJob) -> bool:
        """Ack one job (in the next batch when batching); True once the server recorded it."""
        if self._acker is not None:
            answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

            def settled(_: RunningJob, acked: bool) -> None:
                if not answer.done():
                    answer.set_result(acked)

            self.ack_soon(run, settled)
            return await answer
        try:
            try:
                await self._try_hard(self._ack, run.record.jid, run.lease, run.result)
            except (PayloadTooLarge, ValidationError) as exc:
                if run.result is None:
                    raise
                self._log.error(
                    "the server refused the job's result (%s); acking without it",
                    exc,
                    extra=run.fields(),
                )
                await self._try_hard(self._ack, run.record.jid, run.lease, None)
        except WerkError as exc:
            return self._report_ack(run, False, exc)
        return self._report_ack(run, True, None)

    async def _ack(self, jid: str, lease: str, result: Any) -> None:
        await self._client.ack(jid, lease, result=result)

    def _report_ack(self, run: RunningJob, acked: bool, error: Exception | None) -> bool:
        """Log the outcome of an ack; True if the job is done (the server recorded the ack)."""
        log = self._log
        if error is not None and not isinstance(error, LeaseLost | JobNotFound):
            log.error(
                "ack failed (%s); the job will run again once its lease expires",
                error,
                extra=run.fields(duration_ms=_duration_ms(run)),
            )
            return False
        if acked:
            if log.isEnabledFor(logging.INFO):
                log.info("job done", extra=run.fields(duration_ms=_duration_ms(run)))
            return True
        log.warning(
            "job done but its lease was lost before the ack; it may run again",
            extra=run.fields(duration_ms=_duration_ms(run)),
        )
        return False

    async def fail(self, run: RunningJob, report: FailureReport) -> bool:
        duration_ms = _duration_ms(run)
        report = report.sanitized()
        try:
            try:
                result = await self._try_hard(self._fail, run, report)
            except ValidationError:
                # Should never happen; still, a recorded failure beats a lost one.
                report = replace(report, message=_REFUSED, backtrace=[])
                result = await self._try_hard(self._fail, run, report)
        except ValidationError as exc:
            self._log.error("server refused the failure report: %s", exc, extra=run.fields())
            return False
        except (LeaseLost, JobNotFound):
            self._log.warning(
                "job failed (%s) but its lease was already lost",
                report.errtype,
                extra=run.fields(errtype=report.errtype),
            )
            return False
        except Exception as exc:  # a WerkError, or a report that could not be sent at all
            self._log.error(
                "could not report failure (%s); the job will retry once its lease expires",
                exc,
                extra=run.fields(errtype=report.errtype),
            )
            return False
        self._log.warning(
            "job failed: %s: %s",
            report.errtype,
            report.message,
            extra=run.fields(errtype=report.errtype, state=result.state, duration_ms=duration_ms),
        )
        return True

    async def _fail(self, run: RunningJob, report: FailureReport) -> FailResult:
        return await self._client.fail(run.record.jid, run.lease, **report.request_fields())


def _duration_ms(run: RunningJob) -> float:
    return round((time.monotonic() - run.started) * 1000, 1)
