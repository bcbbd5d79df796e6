"""The HTTP API v1 as data: one function per endpoint builds the request, one parses the answer.

``Client`` and ``AsyncClient`` differ only in how they send; keeping the request shapes here
means the two can never drift apart, and the wire contract is readable in one place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import msgspec

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
    Undecoded,
    Unique,
    UniqueConflict,
    WorkerState,
    check_args,
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

    def body(self) -> bytes | None:
        return None if self.json is None else encode_json(self.json)


encode_json: Callable[[Any], bytes] = msgspec.json.Encoder().encode


class _Fetched(msgspec.Struct):
    jobs: list[JobRecord]


class _Pushed(msgspec.Struct):
    """A batch push's full answer: the jobs stay undecoded until read."""

    jobs: msgspec.Raw
    created: int
    conflicts: list[UniqueConflict] = msgspec.field(default_factory=list)
    refs: dict[str, str] = msgspec.field(default_factory=dict)
    jids: list[str] = msgspec.field(default_factory=list)
    existed: list[str] = msgspec.field(default_factory=list)


class _DependencyPage(msgspec.Struct):
    dependencies: list[Dependency]
    next: str | None = None


class _Beat(msgspec.Struct):
    state: str = "running"


_decode_job = msgspec.json.Decoder(JobRecord).decode
_decode_jobs = msgspec.json.Decoder(list[JobRecord]).decode
_decode_fetched = msgspec.json.Decoder(_Fetched).decode
_decode_pushed = msgspec.json.Decoder(_Pushed).decode
_decode_jids = msgspec.json.Decoder(PushJidsResult).decode
_decode_acks = msgspec.json.Decoder(AckManyResult).decode
_decode_result = msgspec.json.Decoder(JobResult).decode
_decode_fail = msgspec.json.Decoder(FailResult).decode
_decode_extend = msgspec.json.Decoder(ExtendResult).decode
_decode_beat = msgspec.json.Decoder(_Beat).decode
_decode_dependency_page = msgspec.json.Decoder(_DependencyPage).decode
decode_any: Callable[[bytes], Any] = msgspec.json.Decoder().decode


def _jid_path(jid: str, action: str = "") -> str:
    path = f"/v1/jobs/{quote(jid, safe='')}"
    return f"{path}/{action}" if action else path


def push_call(spec: JobSpec) -> Call:
    # Idempotent because the jid is fixed before the first attempt.
    return Call("POST", "/v1/jobs", spec)


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
    keep_result_for: int | None = None,
    unique: Unique | None = None,
    expires_at: datetime | str | None = None,
    expires_in: float | None = None,
    depends_on: Sequence[str | JobSpec | Needs] | None = None,
    on_dependency_failure: str | None = None,
    batch: str | None = None,
) -> JobSpec:
    check_args(args)
    kwargs: dict[str, Any] = {}
    if batch is not None:
        kwargs["batch"] = batch
    if jid is not None:
        kwargs["jid"] = jid
    if depends_on is not None:
        kwargs["depends_on"] = list(depends_on)
    if on_dependency_failure is not None:
        kwargs["on_dependency_failure"] = on_dependency_failure
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
        keep_result_for=keep_result_for,
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


def flow_call(specs: Sequence[JobSpec]) -> Call:
    """A whole graph of jobs in one request (all or nothing): ``Flow``'s push."""
    if len(specs) > MAX_BATCH:
        raise ValueError(f"a flow is pushed in one request: at most {MAX_BATCH} jobs")
    return push_batch_call(specs)


def push_batch_call(specs: Sequence[JobSpec], *, jids_only: bool = False) -> Call:
    """``jids_only``: ask for the short answer (RFC 7240 ``Prefer: return=minimal``), the jids
    instead of the stored jobs."""
    headers = {"Prefer": "return=minimal"} if jids_only else None
    return Call("POST", "/v1/jobs/batch", {"jobs": specs}, headers=headers)


def parse_job(data: bytes) -> JobRecord:
    return _decode_job(data)


def parse_push_batch(data: bytes) -> PushManyResult:
    pushed = _decode_pushed(data)
    return PushManyResult(
        jobs=Undecoded([pushed.jobs], _decode_jobs),
        created=pushed.created,
        conflicts=pushed.conflicts,
        refs=pushed.refs,
        jids=pushed.jids,
        existed=pushed.existed,
    )


def parse_push_jids(data: bytes) -> PushJidsResult:
    return _decode_jids(data)


def _shifted(conflicts: list[UniqueConflict], offset: int) -> list[UniqueConflict]:
    """A later request's conflicts, indexed within everything pushed."""
    return [UniqueConflict(c.index + offset, c.existing_jid, c.on_conflict) for c in conflicts]


def merge_push_jids(results: Iterable[PushJidsResult]) -> PushJidsResult:
    jids: list[str] = []
    existed: list[str] = []
    conflicts: list[UniqueConflict] = []
    refs: dict[str, str] = {}
    created = 0
    for result in results:
        conflicts.extend(_shifted(result.conflicts, len(jids)))
        jids.extend(result.jids)
        existed.extend(result.existed)
        refs.update(result.refs)
        created += result.created
    return PushJidsResult(jids, created, existed, conflicts, refs)


def merge_push_results(results: Sequence[PushManyResult]) -> PushManyResult:
    """One result for all the requests of a ``push_many``, its jobs still undecoded; each
    request's conflicts indexed within the whole push."""
    if len(results) == 1:
        return results[0]
    created = sum(r.created for r in results)
    refs = {ref: jid for r in results for ref, jid in r.refs.items()}
    jids = [jid for r in results for jid in r.jids]
    existed = [jid for r in results for jid in r.existed]
    conflicts: list[UniqueConflict] = []
    offset = 0
    for result in results:
        conflicts.extend(_shifted(result.conflicts, offset))
        offset += len(result.jids)
    parts: list[bytes] = []
    for result in results:
        parts.extend(_undecoded(result).parts)
    return PushManyResult(
        jobs=Undecoded(parts, _decode_jobs), created=created, conflicts=conflicts, refs=refs,
        jids=jids, existed=existed,
    )  # fmt: skip


def _undecoded(result: PushManyResult) -> Undecoded:
    raw = result.__dict__["_jobs"]
    assert isinstance(raw, Undecoded), "merged before anything read them"
    return raw


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


def parse_fetch(data: bytes) -> list[JobRecord]:
    return _decode_fetched(data).jobs


def ack_call(jid: str, lease: str, result: Any = None) -> Call:
    body: dict[str, Any] = {"lease": lease}
    if result is not None:
        body["result"] = result
    return Call("POST", _jid_path(jid, "ack"), body)


# An ack of a batch: (jid, lease), or (jid, lease, result).
AckItem = tuple[str, str] | tuple[str, str, Any]


def ack_many_call(acks: Sequence[AckItem]) -> Call:
    items = []
    for ack in acks:
        item: dict[str, Any] = {"jid": ack[0], "lease": ack[1]}
        if len(ack) > 2 and ack[2] is not None:
            item["result"] = ack[2]
        items.append(item)
    return Call("POST", "/v1/ack", {"acks": items})


def result_call(jid: str, wait: float) -> Call:
    """The job's outcome, long-polling up to ``wait`` seconds for it to settle."""
    seconds = max(0.0, float(wait))
    params = f"?wait={int(seconds) if seconds.is_integer() else seconds}" if seconds else ""
    timeout = min(MAX_FETCH_WAIT, seconds) + LONG_POLL_SLACK
    return Call("GET", _jid_path(jid, "result") + params, timeout=timeout)


def parse_result(data: bytes) -> JobResult:
    return _decode_result(data)


def parse_ack_many(data: bytes) -> AckManyResult:
    return _decode_acks(data)


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


def parse_fail(data: bytes) -> FailResult:
    return _decode_fail(data)


def extend_call(jid: str, lease: str, *, reserve_for: int | None, progress: Any) -> Call:
    body: dict[str, Any] = {"lease": lease}
    if reserve_for is not None:
        body["reserve_for"] = reserve_for
    if progress is not UNSET:
        body["progress"] = progress
    return Call("POST", _jid_path(jid, "extend"), body)


def parse_extend(data: bytes) -> ExtendResult:
    return _decode_extend(data)


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


def parse_beat(data: bytes) -> WorkerState:
    state = _decode_beat(data).state
    if state not in ("running", "quiet", "terminate"):
        return "running"
    return state  # type: ignore[return-value]


def get_call(jid: str) -> Call:
    return Call("GET", _jid_path(jid))


# Dependencies per page asked for: the server's largest limit, so that its budget of result bytes,
# not a count, ends a page.
DEPENDENCY_PAGE_MAX = 1000


def dependencies_call(jid: str, after: str | None) -> Call:
    """A page of the job's dependencies with their results, after the dependency ``after``."""
    query = f"?limit={DEPENDENCY_PAGE_MAX}"
    if after is not None:
        query += f"&cursor={quote(after, safe='')}"
    return Call("GET", _jid_path(jid, "dependencies") + query)


def parse_dependency_page(data: bytes) -> tuple[list[Dependency], str | None]:
    """The page's dependencies and the cursor of the next page (None: it was the last)."""
    page = _decode_dependency_page(data)
    return page.dependencies, page.next


def info_call() -> Call:
    return Call("GET", "/v1/info")


def parse_info(data: bytes) -> ServerInfo:
    return ServerInfo.from_wire(decode_any(data))


# -- batches -------------------------------------------------------------------------------

_decode_batch = msgspec.json.Decoder(BatchStatus).decode


def _batch_path(bid: str, action: str = "") -> str:
    path = f"/v1/batches/{quote(bid, safe='')}"
    return f"{path}/{action}" if action else path


def batch_new_call(
    *,
    description: str | None,
    parent: str | None,
    on_complete: JobSpec | None,
    on_success: JobSpec | None,
    on_death: JobSpec | None,
) -> Call:
    """Not idempotent: each request opens a new batch."""
    body: dict[str, Any] = {}
    if description is not None:
        body["description"] = description
    if parent is not None:
        body["parent"] = parent
    for name, spec in (
        ("on_complete", on_complete),
        ("on_success", on_success),
        ("on_death", on_death),
    ):
        if spec is not None:
            body[name] = as_spec(spec)
    return Call("POST", "/v1/batches", body, idempotent=False)


def batch_open_call(bid: str) -> Call:
    return Call("POST", _batch_path(bid, "open"), {})


def batch_commit_call(bid: str) -> Call:
    return Call("POST", _batch_path(bid, "commit"), {})


def batch_get_call(bid: str) -> Call:
    return Call("GET", _batch_path(bid))


def parse_batch(data: bytes) -> BatchStatus:
    return _decode_batch(data)


def in_batch(spec: JobSpec, bid: str) -> JobSpec:
    """The job as a member of batch ``bid``."""
    return msgspec.structs.replace(spec, batch=bid)
