"""The HTTP API v1 as data: one function per endpoint builds the request, one parses the answer.

``Client`` and ``AsyncClient`` differ only in how they send; keeping the request shapes here
means the two can never drift apart, and the wire contract is readable in one place.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from .models import (
    AckManyResult,
    ExtendResult,
    FailResult,
    JobRecord,
    JobSpec,
    PushJidsResult,
    PushManyResult,
    ServerInfo,
    Unique,
    UniqueConflict,
    WorkerState,
    check_args,
    parse_time,
)

DEFAULT_URL = "http://127.0.0.1:7420"
MAX_BATCH = 1000
MAX_FETCH_WAIT = 30.0
# Extra read time on top of a long poll's wait, so the client never gives up on a fetch
# that the server is about to answer.
LONG_POLL_SLACK = 10.0

UNSET: Any = object()


def resolve_url(url: str | None) -> str:
    """Explicit argument, else ``WERK_URL``, else the server's default address."""
    return (url or os.environ.get("WERK_URL") or DEFAULT_URL).rstrip("/")


def resolve_token(token: str | None) -> str | None:
    """Explicit argument, else ``WERK_TOKEN``; empty means no token."""
    return token if token is not None else (os.environ.get("WERK_TOKEN") or None)


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request, described independently of the transport that sends it."""

    method: str
    path: str
    json: Any = None
    idempotent: bool = True
    timeout: float | None = None
    headers: Mapping[str, str] | None = None


def _jid_path(jid: str, action: str = "") -> str:
    path = f"/v1/jobs/{quote(jid, safe='')}"
    return f"{path}/{action}" if action else path


def push_call(spec: JobSpec) -> Call:
    # Idempotent because the jid is fixed before the first attempt.
    return Call("POST", "/v1/jobs", spec.to_wire())


def push_spec(
    jobtype: str,
    args: Sequence[Any] | None,
    *,
    queue: str | None,
    at: datetime | timedelta | str | None,
    retry: int | None,
    reserve_for: int | None,
    priority: int | None,
    backtrace: int | None,
    custom: Mapping[str, Any] | None,
    jid: str | None,
    unique: Unique | None = None,
    expires_at: datetime | str | None = None,
    expires_in: float | None = None,
) -> JobSpec:
    check_args(args)
    kwargs: dict[str, Any] = {}
    if jid is not None:
        kwargs["jid"] = jid
    return JobSpec(
        jobtype=jobtype,
        args=list(args or []),
        queue=queue,
        at=at,
        retry=retry,
        reserve_for=reserve_for,
        priority=priority,
        backtrace=backtrace,
        custom=dict(custom) if custom is not None else None,
        unique=unique,
        expires_at=expires_at,
        expires_in=expires_in,
        **kwargs,
    )


def as_spec(job: JobSpec | Mapping[str, Any]) -> JobSpec:
    """Accept a ``JobSpec`` or a plain dict with the same field names."""
    if isinstance(job, JobSpec):
        return job
    return JobSpec(**dict(job))


def batches(specs: Iterable[JobSpec], size: int = MAX_BATCH) -> Iterable[list[JobSpec]]:
    chunk: list[JobSpec] = []
    for spec in specs:
        chunk.append(spec)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def push_batch_call(specs: Sequence[JobSpec], *, jids_only: bool = False) -> Call:
    """``jids_only``: ask for the short answer (RFC 7240 ``Prefer: return=minimal``), the jids
    instead of the stored jobs."""
    headers = {"Prefer": "return=minimal"} if jids_only else None
    return Call("POST", "/v1/jobs/batch", {"jobs": [s.to_wire() for s in specs]}, headers=headers)


def parse_job(data: Any) -> JobRecord:
    return JobRecord.from_wire(data)


def _conflicts(data: Any) -> list[UniqueConflict]:
    return [UniqueConflict.from_wire(c) for c in data.get("conflicts", [])]


def parse_push_batch(data: Any) -> PushManyResult:
    jobs = [JobRecord.from_wire(j) for j in data.get("jobs", [])]
    return PushManyResult(
        jobs=jobs, created=int(data.get("created", len(jobs))), conflicts=_conflicts(data)
    )


def parse_push_jids(data: Any) -> PushJidsResult:
    return PushJidsResult(
        jids=[str(j) for j in data["jids"]],
        created=int(data["created"]),
        existed=[str(j) for j in data["existed"]],
        conflicts=_conflicts(data),
    )


def _shifted(conflicts: list[UniqueConflict], offset: int) -> list[UniqueConflict]:
    """A later request's conflicts, indexed within everything pushed."""
    return [UniqueConflict(c.index + offset, c.existing_jid, c.on_conflict) for c in conflicts]


def merge_push_jids(results: Iterable[PushJidsResult]) -> PushJidsResult:
    jids: list[str] = []
    existed: list[str] = []
    conflicts: list[UniqueConflict] = []
    created = 0
    for result in results:
        conflicts.extend(_shifted(result.conflicts, len(jids)))
        jids.extend(result.jids)
        existed.extend(result.existed)
        created += result.created
    return PushJidsResult(jids=jids, created=created, existed=existed, conflicts=conflicts)


def merge_push_results(results: Iterable[PushManyResult]) -> PushManyResult:
    jobs: list[JobRecord] = []
    conflicts: list[UniqueConflict] = []
    created = 0
    for result in results:
        conflicts.extend(_shifted(result.conflicts, len(jobs)))
        jobs.extend(result.jobs)
        created += result.created
    return PushManyResult(jobs=jobs, created=created, conflicts=conflicts)


def fetch_call(queues: Sequence[str], wid: str, count: int, wait: float) -> Call:
    if isinstance(queues, str):
        queues = [q for q in queues.split(",") if q]
    # Values go out as given: the server validates them and answers invalid_request.
    body = {
        "queues": list(queues),
        "wid": wid,
        "count": count,
        "wait": int(wait) if float(wait).is_integer() else wait,
    }
    # Not idempotent: repeating a fetch whose answer was lost would lease a second batch.
    timeout = max(0.0, min(MAX_FETCH_WAIT, float(wait))) + LONG_POLL_SLACK
    return Call("POST", "/v1/fetch", body, idempotent=False, timeout=timeout)


def parse_fetch(data: Any) -> list[JobRecord]:
    return [JobRecord.from_wire(j) for j in data.get("jobs", [])]


def ack_call(jid: str, lease: str) -> Call:
    return Call("POST", _jid_path(jid, "ack"), {"lease": lease})


def ack_many_call(acks: Sequence[tuple[str, str]]) -> Call:
    return Call("POST", "/v1/ack", {"acks": [{"jid": j, "lease": lease} for j, lease in acks]})


def parse_ack_many(data: Any) -> AckManyResult:
    return AckManyResult(
        acked=[str(j) for j in data.get("acked", [])],
        lease_lost=[str(j) for j in data.get("lease_lost", [])],
    )


def fail_call(
    jid: str,
    lease: str,
    *,
    errtype: str,
    message: str,
    backtrace: Sequence[str] | None,
    retry_in: float | None,
    retry: bool | None,
) -> Call:
    body: dict[str, Any] = {
        "lease": lease,
        "errtype": errtype,
        "message": message,
        "backtrace": list(backtrace or []),
    }
    if retry_in is not None:
        body["retry_in"] = int(retry_in) if float(retry_in).is_integer() else retry_in
    if retry is not None:
        body["retry"] = retry
    return Call("POST", _jid_path(jid, "fail"), body)


def parse_fail(data: Any) -> FailResult:
    return FailResult(
        jid=str(data["jid"]), state=str(data["state"]), next_at=parse_time(data.get("next_at"))
    )


def extend_call(jid: str, lease: str, *, reserve_for: int | None, progress: Any) -> Call:
    body: dict[str, Any] = {"lease": lease}
    if reserve_for is not None:
        body["reserve_for"] = reserve_for
    if progress is not UNSET:
        body["progress"] = progress
    return Call("POST", _jid_path(jid, "extend"), body)


def parse_extend(data: Any) -> ExtendResult:
    expires = parse_time(data["lease_expires_at"])
    assert expires is not None
    return ExtendResult(jid=str(data["jid"]), lease_expires_at=expires)


def beat_call(
    wid: str,
    *,
    hostname: str | None,
    pid: int | None,
    labels: Sequence[str] | None,
    current_state: WorkerState | None,
    rss_kb: int | None,
) -> Call:
    body: dict[str, Any] = {"wid": wid}
    optional = {
        "hostname": hostname,
        "pid": pid,
        "labels": list(labels) if labels is not None else None,
        "current_state": current_state,
        "rss_kb": rss_kb,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return Call("POST", "/v1/beat", body)


def parse_beat(data: Any) -> WorkerState:
    state = data.get("state", "running")
    if state not in ("running", "quiet", "terminate"):
        return "running"
    return state  # type: ignore[no-any-return]


def get_call(jid: str) -> Call:
    return Call("GET", _jid_path(jid))


def info_call() -> Call:
    return Call("GET", "/v1/info")


def parse_info(data: Any) -> ServerInfo:
    return ServerInfo.from_wire(data)
