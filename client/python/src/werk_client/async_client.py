"""``AsyncClient``: the asyncio client, used by the worker runtime and async producers.

The mirror image of ``Client`` (same methods, same request shapes from ``protocol``), with
``await``. Transient failures are retried per the ``RetryPolicy`` without blocking the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from . import admin, protocol
from .admin import BatchPage, BulkResult, HistoryDay, JobPage, QueueDetail, WorkerInfo
from .batch import AsyncBatch
from .errors import Unavailable, error_from_response
from .flow import Flow
from .models import (
    AckManyResult,
    BatchStatus,
    Dependency,
    ExtendResult,
    FailResult,
    JobRecord,
    JobResult,
    JobSpec,
    Needs,
    PushJidsResult,
    PushManyResult,
    ServerInfo,
    Unique,
    WorkerState,
)
from .protocol import UNSET, Call
from .retry import RetryPolicy
from .senders import async_sender
from .transport import TransportError
from .version import USER_AGENT

if TYPE_CHECKING:
    import httpx

__all__ = ["AsyncClient"]


class AsyncClient:
    """Asyncio Werk client.

    ``url`` defaults to ``WERK_URL`` (else ``http://127.0.0.1:7420``) and ``token`` to
    ``WERK_TOKEN``. Use it as an async context manager, or call ``aclose()``, to release
    connections.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        self.url = protocol.resolve_url(url)
        self._retry = retry or RetryPolicy()
        self._timeout = timeout
        headers = {
            **protocol.auth_headers(protocol.resolve_token(token)),
            "User-Agent": USER_AGENT,
        }
        self._sender = async_sender(self.url, headers, timeout, transport, limits)

    def _keep_idle(self, connections: int) -> None:
        """No cap on connections, ``connections`` of them kept idle: a worker's long polls each
        hold one, and its heartbeats and acks must never wait behind them."""
        keep = getattr(self._sender, "keep_idle", None)
        if keep is not None:
            keep(connections)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._sender.aclose()

    # -- producer side ---------------------------------------------------------------------

    async def push(
        self,
        jobtype: str,
        args: Sequence[Any] | None = None,
        *,
        queue: str | None = None,
        at: datetime | timedelta | str | None = None,
        retry: int | None = None,
        reserve_for: int | None = None,
        priority: int | None = None,
        backtrace: int | None = None,
        custom: Mapping[str, Any] | None = None,
        jid: str | None = None,
        keep_result_for: int | None = None,
        unique: Unique | None = None,
        expires_at: datetime | str | None = None,
        expires_in: float | None = None,
        depends_on: Sequence[str | JobSpec | Needs] | None = None,
        on_dependency_failure: str | None = None,
        batch: str | None = None,
    ) -> JobRecord:
        """Enqueue one job and return it as stored.

        A jid is generated when none is given; pushing the same jid twice stores one job.
        With ``unique``, a job whose key another job holds is not stored: ``NotUnique`` names
        the holder (``on_conflict="reject"``), or the holder is returned with ``duplicate``
        True. A job not started by ``expires_at`` (or ``expires_in`` seconds after ``at`` or
        now) is never run: it becomes ``expired``. With ``depends_on`` (jids of stored jobs)
        the job waits (state ``waiting``) until each has settled, then runs with their results
        in ``job.dependencies``; ``on_dependency_failure`` says what it does when one ends
        badly: ``"fail"`` (the default: it goes dead too), ``"skip"`` or ``"ignore"``, and
        ``Needs(jid, on_failure=...)`` gives one dependency a policy of its own.
        With ``batch`` (the bid of an open batch) the job joins that batch.
        """
        spec = protocol.push_spec(
            jobtype,
            args,
            queue=queue,
            at=at,
            retry=retry,
            reserve_for=reserve_for,
            priority=priority,
            backtrace=backtrace,
            custom=custom,
            jid=jid,
            keep_result_for=keep_result_for,
            unique=unique,
            expires_at=expires_at,
            expires_in=expires_in,
            depends_on=depends_on,
            on_dependency_failure=on_dependency_failure,
            batch=batch,
        )
        return protocol.parse_job(await self._send(protocol.push_call(spec)))

    async def push_many(self, jobs: Iterable[JobSpec | Mapping[str, Any]]) -> PushManyResult:
        """Enqueue many jobs, 1,000 per request; each request is all-or-nothing (two jobs with
        one unique key in a request are refused). A job whose unique key another job holds is
        answered by the holder and listed in ``conflicts``."""
        specs = [protocol.as_spec(j) for j in jobs]
        results = [
            protocol.parse_push_batch(await self._send(protocol.push_batch_call(chunk)))
            for chunk in protocol.batches(specs)
        ]
        return protocol.merge_push_results(results)

    async def push_flow(self, flow: Flow) -> PushManyResult:
        """Push a flow (a graph of jobs, ``Flow``) in one request, all or nothing; ``refs`` of
        the answer maps each ref to its jid. A cycle or a dependency neither in the flow nor
        stored is refused (``ValidationError``: ``dependency_cycle``,
        ``dependency_not_found``) and nothing is stored."""
        return protocol.parse_push_batch(await self._send(protocol.flow_call(flow.jobs)))

    async def push_jids(self, jobs: Iterable[JobSpec | Mapping[str, Any]]) -> PushJidsResult:
        """As ``push_many``, answered with the jids only (in input order) instead of the stored
        jobs: less work for the server and less to read when the jobs are not needed."""
        specs = [protocol.as_spec(j) for j in jobs]
        results = [
            protocol.parse_push_jids(
                await self._send(protocol.push_batch_call(chunk, jids_only=True))
            )
            for chunk in protocol.batches(specs)
        ]
        return protocol.merge_push_jids(results)

    def batch(
        self,
        *,
        description: str | None = None,
        parent: str | None = None,
        on_complete: JobSpec | Mapping[str, Any] | None = None,
        on_success: JobSpec | Mapping[str, Any] | None = None,
        on_death: JobSpec | Mapping[str, Any] | None = None,
    ) -> AsyncBatch:
        """A new batch, opened when its ``with`` block is entered and committed when the block
        ends without an exception; its ``push`` and ``push_many`` join it. Callbacks run once:
        ``on_complete`` when every member has settled, ``on_success`` when every member has
        completed, ``on_death`` when the first member ends without completing."""
        return AsyncBatch(
            self,
            description=description,
            parent=parent,
            on_complete=on_complete,
            on_success=on_success,
            on_death=on_death,
        )

    def open_batch(self, bid: str) -> AsyncBatch:
        """An existing batch, opened again when its ``with`` block is entered (a member job adds
        work to its own batch this way) and committed when the block ends."""
        return AsyncBatch(self, bid)

    async def create_batch(
        self,
        *,
        description: str | None = None,
        parent: str | None = None,
        on_complete: JobSpec | Mapping[str, Any] | None = None,
        on_success: JobSpec | Mapping[str, Any] | None = None,
        on_death: JobSpec | Mapping[str, Any] | None = None,
    ) -> BatchStatus:
        """Open a new batch (``batch`` wraps this in a ``with`` block)."""
        call = protocol.batch_new_call(
            description=description,
            parent=parent,
            on_complete=None if on_complete is None else protocol.as_spec(on_complete),
            on_success=None if on_success is None else protocol.as_spec(on_success),
            on_death=None if on_death is None else protocol.as_spec(on_death),
        )
        return protocol.parse_batch(await self._send(call))

    async def reopen_batch(self, bid: str) -> BatchStatus:
        """Open a committed batch again so more members may join (``BatchFinished`` once it
        has finished)."""
        return protocol.parse_batch(await self._send(protocol.batch_open_call(bid)))

    async def commit_batch(self, bid: str) -> BatchStatus:
        """Commit the batch: it finishes once no member is pending."""
        return protocol.parse_batch(await self._send(protocol.batch_commit_call(bid)))

    async def batch_status(self, bid: str) -> BatchStatus:
        """How the batch stands; raises ``BatchNotFound``."""
        return protocol.parse_batch(await self._send(protocol.batch_get_call(bid)))

    async def get(self, jid: str) -> JobRecord:
        """The job as stored; raises ``JobNotFound`` (completed jobs are deleted at ack)."""
        return protocol.parse_job(await self._send(protocol.get_call(jid)))

    async def dependencies(self, jid: str, *, after: str | None = None) -> list[Dependency]:
        """The job's dependencies in jid order, each with how it ended and its result: every
        dependency and result, where a read or fetch of the job may leave results out
        (``result_omitted``) when they add up to more than the server carries in one answer,
        and dependencies (``dependencies_omitted``) beyond the most it lists. ``after``: only
        those after this dependency's jid. Raises ``JobNotFound``."""
        found: list[Dependency] = []
        while True:
            page, after = protocol.parse_dependency_page(
                await self._send(protocol.dependencies_call(jid, after))
            )
            found += page
            if after is None:
                return found

    async def result(self, jid: str, *, wait: float = 0) -> JobResult:
        """The job's outcome, waiting up to ``wait`` seconds (the server's long-poll limit
        applies) for it to settle: ``done`` says whether it did. Raises ``JobNotFound`` when the
        job is not stored (a job is deleted at ack unless pushed with ``keep_result_for``)."""
        return protocol.parse_result(await self._send(protocol.result_call(jid, wait)))

    async def info(self) -> ServerInfo:
        return protocol.parse_info(await self._send(protocol.info_call()))

    # -- admin -----------------------------------------------------------------------------

    async def list_jobs(
        self,
        *,
        state: str | None = None,
        queue: str | None = None,
        jobtype: str | None = None,
        q: str | None = None,
        failed: bool | None = None,
        order: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> JobPage:
        """A page of the jobs matching every filter given (``q``: words of their args, custom,
        errtype or message), ``order`` ``"newest"`` (default) or ``"oldest"`` first; pass the
        page's ``next_cursor`` as ``cursor`` for the next one."""
        filters = {"state": state, "queue": queue, "jobtype": jobtype, "q": q, "failed": failed,
                   "order": order, "cursor": cursor, "limit": limit}  # fmt: skip
        return admin.parse_job_page(await self._send(admin.list_jobs_call(filters)))

    async def retry_job(self, jid: str) -> JobRecord:
        """Run a dead, expired, skipped or scheduled job now; ``WerkError`` with code
        ``job_state_conflict`` for a job in another state."""
        return protocol.parse_job(await self._send(admin.job_action_call(jid, "retry")))

    async def kill_job(self, jid: str) -> JobRecord:
        """Move a scheduled, available, waiting or active job to dead (an active one's worker
        loses its lease)."""
        return protocol.parse_job(await self._send(admin.job_action_call(jid, "kill")))

    async def cancel_job(self, jid: str) -> JobRecord:
        """Cancel a scheduled, available, waiting or active job: it will not run (again)."""
        return protocol.parse_job(await self._send(admin.job_action_call(jid, "cancel")))

    async def delete_job(self, jid: str) -> None:
        """Delete the job, in any state; ``JobNotFound`` when none is stored."""
        await self._send(admin.delete_job_call(jid))

    async def retry_jobs(self, **filters: Any) -> BulkResult:
        """``retry_job`` on every job matching ``state``, ``queue``, ``jobtype``, ``q`` and
        ``failed``, at most ``limit``."""
        return admin.parse_bulk(await self._send(admin.bulk_call("retry", filters)))

    async def kill_jobs(self, **filters: Any) -> BulkResult:
        """``kill_job`` on every matching job (filters as ``retry_jobs``)."""
        return admin.parse_bulk(await self._send(admin.bulk_call("kill", filters)))

    async def cancel_jobs(self, **filters: Any) -> BulkResult:
        """``cancel_job`` on every matching job (filters as ``retry_jobs``)."""
        return admin.parse_bulk(await self._send(admin.bulk_call("cancel", filters)))

    async def delete_jobs(self, **filters: Any) -> BulkResult:
        """Delete every matching job (filters as ``retry_jobs``)."""
        return admin.parse_bulk(await self._send(admin.bulk_call("delete", filters)))

    async def list_queues(self) -> list[QueueDetail]:
        return admin.parse_queues(await self._send(admin.queues_call()))

    async def queue(self, name: str) -> QueueDetail:
        return admin.parse_queue(await self._send(admin.queue_call(name)))

    async def pause_queue(self, name: str) -> QueueDetail:
        """Stop handing out the queue's jobs; pushes are still accepted."""
        return admin.parse_queue(await self._send(admin.pause_call(name, True)))

    async def resume_queue(self, name: str) -> QueueDetail:
        return admin.parse_queue(await self._send(admin.pause_call(name, False)))

    async def clear_queue(self, name: str) -> int:
        """Delete the queue's available jobs; how many were deleted."""
        return admin.parse_cleared(await self._send(admin.clear_call(name)))

    async def list_workers(self, *, include_gone: bool = False) -> list[WorkerInfo]:
        return admin.parse_workers(await self._send(admin.workers_call(include_gone)))

    async def quiet_worker(self, wid: str) -> WorkerState:
        """Ask the worker to stop fetching (on its next beat); its state."""
        return admin.parse_signalled(await self._send(admin.signal_call("quiet", wid)))

    async def terminate_worker(self, wid: str) -> WorkerState:
        """Ask the worker to shut down (on its next beat); its state."""
        return admin.parse_signalled(await self._send(admin.signal_call("terminate", wid)))

    async def quiet_workers(self) -> int:
        """``quiet_worker`` for every live worker; how many were asked."""
        return admin.parse_changed(await self._send(admin.signal_call("quiet", None)))

    async def terminate_workers(self) -> int:
        """``terminate_worker`` for every live worker; how many were asked."""
        return admin.parse_changed(await self._send(admin.signal_call("terminate", None)))

    async def history(self, *, days: int = 30, queue: str | None = None) -> list[HistoryDay]:
        """Jobs processed, failed and pushed per UTC day, oldest first (one queue, or all)."""
        return admin.parse_history(await self._send(admin.history_call(days, queue)))

    async def list_batches(
        self, *, cursor: str | None = None, limit: int | None = None, unfinished: bool = False
    ) -> BatchPage:
        """A page of the batches, newest first; pass the page's ``next`` as ``cursor``."""
        return admin.parse_batches(await self._send(admin.batches_call(cursor, limit, unfinished)))

    # -- worker side -----------------------------------------------------------------------

    async def fetch(
        self, queues: Sequence[str], *, wid: str, count: int = 1, wait: float = 0
    ) -> list[JobRecord]:
        """Lease up to ``count`` jobs from ``queues`` (in order), long-polling up to ``wait`` s."""
        return protocol.parse_fetch(await self._send(protocol.fetch_call(queues, wid, count, wait)))

    async def ack(self, jid: str, lease: str, *, result: Any = None) -> None:
        """Complete the attempt; ``result`` (JSON, not None) is stored with a job pushed with
        ``keep_result_for`` (``ResultTooLarge`` beyond the server's limit: nothing acked)."""
        await self._send(protocol.ack_call(jid, lease, result))

    async def ack_many(self, acks: Iterable[protocol.AckItem]) -> AckManyResult:
        """Acknowledge ``(jid, lease)`` or ``(jid, lease, result)`` items; stale leases are
        reported, not raised."""
        pairs = list(acks)
        acked: list[str] = []
        lost: list[str] = []
        for start in range(0, len(pairs), protocol.MAX_BATCH):
            chunk = pairs[start : start + protocol.MAX_BATCH]
            result = protocol.parse_ack_many(await self._send(protocol.ack_many_call(chunk)))
            acked.extend(result.acked)
            lost.extend(result.lease_lost)
        return AckManyResult(acked=acked, lease_lost=lost)

    async def fail(
        self,
        jid: str,
        lease: str,
        *,
        errtype: str = "unknown",
        message: str = "",
        backtrace: Sequence[str] | None = None,
        retry_in: float | None = None,
        retry: bool | None = None,
    ) -> FailResult:
        """Report a failed attempt; ``retry_in`` overrides the backoff, ``retry=False`` buries."""
        call = protocol.fail_call(
            jid,
            lease,
            errtype=errtype,
            message=message,
            backtrace=backtrace,
            retry_in=retry_in,
            retry=retry,
        )
        return protocol.parse_fail(await self._send(call))

    async def extend(
        self, jid: str, lease: str, *, reserve_for: int | None = None, progress: Any = UNSET
    ) -> ExtendResult:
        """Push the lease's expiry forward, optionally recording a progress checkpoint."""
        call = protocol.extend_call(jid, lease, reserve_for=reserve_for, progress=progress)
        return protocol.parse_extend(await self._send(call))

    async def beat(
        self,
        wid: str,
        *,
        hostname: str | None = None,
        pid: int | None = None,
        labels: Sequence[str] | None = None,
        current_state: WorkerState | None = None,
        rss_kb: int | None = None,
    ) -> WorkerState:
        """Heartbeat; returns what the server wants: ``running``, ``quiet`` or ``terminate``."""
        call = protocol.beat_call(
            wid,
            hostname=hostname,
            pid=pid,
            labels=labels,
            current_state=current_state,
            rss_kb=rss_kb,
        )
        return protocol.parse_beat(await self._send(call))

    # -- transport -------------------------------------------------------------------------

    async def _send(self, call: Call) -> bytes:
        """The answer's body; typed errors for error answers and unreachable servers."""
        timeout = call.timeout if call.timeout is not None else self._timeout
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = await self._sender.send(call, timeout)
            except TransportError as exc:
                retryable = self._retry.should_retry_exception(exc, idempotent=call.idempotent)
                if not retryable or attempt + 1 >= self._retry.attempts:
                    raise Unavailable(f"{type(exc).__name__}: {exc}", code="unreachable") from exc
            else:
                if response.is_success:
                    return response.content
                error = error_from_response(response)
                if not self._retry.should_retry_status(response.status_code):
                    raise error
                if attempt + 1 >= self._retry.attempts:
                    raise error
                retry_after = error.retry_after
            await asyncio.sleep(self._retry.delay(attempt, retry_after))
            attempt += 1
