"""The admin API's requests and answers (jobs listed and acted on, queues, workers, history,
batches), as the protocol module describes the job API's: each call a ``Call``, each answer
decoded into the models below. ``Client`` and ``AsyncClient`` send them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal
from urllib.parse import quote, urlencode

import msgspec

from .models import BatchStatus, JobRecord, WorkerState
from .protocol import Call

JobAction = Literal["retry", "kill", "cancel"]
BulkJobAction = Literal["retry", "kill", "cancel", "delete"]
WorkerSignal = Literal["quiet", "terminate"]


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of ``list_jobs``; ``next_cursor`` (None: the last page) asks for the next."""

    jobs: list[JobRecord]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk action changed; ``more``: jobs beyond ``limit`` still match."""

    action: str
    changed: int
    more: bool


@dataclass(frozen=True, slots=True)
class QueueDetail:
    """A queue: jobs available (``size``), how long the oldest has waited, whether it is paused,
    and its jobs counted per state."""

    name: str
    size: int
    latency_seconds: float
    paused: bool
    counts: dict[str, int]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process as its beats describe it; ``state`` is what the server asks of it
    (running, quiet, terminate), ``reported_state`` what it last said, ``busy`` its jobs."""

    wid: str
    hostname: str
    pid: int | None
    labels: list[str]
    rss_kb: int | None
    reported_state: str | None
    state: WorkerState
    started_at: datetime
    last_beat_at: datetime
    gone_at: datetime | None
    busy: int


@dataclass(frozen=True, slots=True)
class HistoryDay:
    """Jobs processed, failed and pushed on one UTC day."""

    day: date
    processed: int
    failed: int
    pushed: int


@dataclass(frozen=True, slots=True)
class BatchPage:
    """A page of ``list_batches``; ``next`` (None: the last page) asks for the next."""

    batches: list[BatchStatus]
    next: str | None = None


class _Queues(msgspec.Struct):
    queues: list[QueueDetail]


class _Workers(msgspec.Struct):
    workers: list[WorkerInfo]


class _Cleared(msgspec.Struct):
    deleted: int


class _Signalled(msgspec.Struct):
    state: WorkerState


class _Changed(msgspec.Struct):
    changed: int


class _History(msgspec.Struct):
    days: list[HistoryDay]


_decode_page = msgspec.json.Decoder(JobPage).decode
_decode_bulk = msgspec.json.Decoder(BulkResult).decode
_decode_queue = msgspec.json.Decoder(QueueDetail).decode
_decode_queues = msgspec.json.Decoder(_Queues).decode
_decode_workers = msgspec.json.Decoder(_Workers).decode
_decode_cleared = msgspec.json.Decoder(_Cleared).decode
_decode_signalled = msgspec.json.Decoder(_Signalled).decode
_decode_changed = msgspec.json.Decoder(_Changed).decode
_decode_history = msgspec.json.Decoder(_History).decode
_decode_batches = msgspec.json.Decoder(BatchPage).decode


def _query(path: str, params: Mapping[str, Any]) -> str:
    """``path`` with the parameters given (None: left out; booleans as the server reads them)."""
    given = {
        k: ("true" if v else "false") if isinstance(v, bool) else v
        for k, v in params.items()
        if v is not None
    }
    return f"{path}?{urlencode(given)}" if given else path


def _segment(value: str) -> str:
    return quote(value, safe="")


# Acting on jobs changes them: a request whose answer was lost is not repeated (a second
# cancel would answer job_state_conflict for the job the first one cancelled).


def list_jobs_call(filters: Mapping[str, Any]) -> Call:
    return Call("GET", _query("/v1/jobs", filters))


def parse_job_page(data: bytes) -> JobPage:
    return _decode_page(data)


def job_action_call(jid: str, action: JobAction) -> Call:
    return Call("POST", f"/v1/jobs/{_segment(jid)}/{action}", idempotent=False)


def delete_job_call(jid: str) -> Call:
    return Call("DELETE", f"/v1/jobs/{_segment(jid)}", idempotent=False)


BULK_FILTERS = frozenset(("state", "queue", "jobtype", "q", "failed", "limit"))


def bulk_call(action: BulkJobAction, filters: Mapping[str, Any]) -> Call:
    unknown = filters.keys() - BULK_FILTERS
    if unknown:
        raise TypeError(f"unknown filters {sorted(unknown)}; known: {sorted(BULK_FILTERS)}")
    body = {k: v for k, v in filters.items() if v is not None}
    return Call("POST", f"/v1/jobs/{action}", body, idempotent=False)


def parse_bulk(data: bytes) -> BulkResult:
    return _decode_bulk(data)


def queues_call() -> Call:
    return Call("GET", "/v1/queues")


def parse_queues(data: bytes) -> list[QueueDetail]:
    return _decode_queues(data).queues


def queue_call(name: str) -> Call:
    return Call("GET", f"/v1/queues/{_segment(name)}")


def pause_call(name: str, paused: bool) -> Call:
    """Pausing or resuming twice is the same as once: repeated after a lost answer."""
    return Call("POST", f"/v1/queues/{_segment(name)}/{'pause' if paused else 'resume'}")


def parse_queue(data: bytes) -> QueueDetail:
    return _decode_queue(data)


def clear_call(name: str) -> Call:
    return Call("DELETE", f"/v1/queues/{_segment(name)}/jobs", idempotent=False)


def parse_cleared(data: bytes) -> int:
    return _decode_cleared(data).deleted


def workers_call(include_gone: bool) -> Call:
    return Call("GET", _query("/v1/workers", {"include_gone": include_gone or None}))


def parse_workers(data: bytes) -> list[WorkerInfo]:
    return _decode_workers(data).workers


def signal_call(signal: WorkerSignal, wid: str | None) -> Call:
    """One worker (``wid``) or every live one (None); repeated after a lost answer, as the
    worker reads the request on its next beat either way."""
    return Call("POST", f"/v1/workers/{_segment(wid)}/{signal}" if wid else f"/v1/workers/{signal}")


def parse_signalled(data: bytes) -> WorkerState:
    return _decode_signalled(data).state


def parse_changed(data: bytes) -> int:
    return _decode_changed(data).changed


def history_call(days: int, queue: str | None) -> Call:
    return Call("GET", _query("/v1/history", {"days": days, "queue": queue}))


def parse_history(data: bytes) -> list[HistoryDay]:
    return _decode_history(data).days


def batches_call(cursor: str | None, limit: int | None, unfinished: bool) -> Call:
    params = {"cursor": cursor, "limit": limit, "unfinished": unfinished or None}
    return Call("GET", _query("/v1/batches", params))


def parse_batches(data: bytes) -> BatchPage:
    return _decode_batches(data)
