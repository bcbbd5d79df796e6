"""Typed views of what the server returns (immutable), and the spec of a job to push.

The wire format is JSON; these classes exist so editors and type checkers know the fields and
timestamps arrive as timezone-aware ``datetime`` objects rather than strings. Unknown
fields the server may add later are ignored, so a newer server never breaks an older client.
Answers are decoded straight into these classes by msgspec (see ``protocol``); the jobs of a
``push_many`` answer only when the caller reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, overload

import msgspec

from .jids import new_jid
from .timeouts import check_timeout, custom_timeout

__all__ = [
    "AckManyResult",
    "ExtendResult",
    "FailResult",
    "Failure",
    "JobRecord",
    "JobResult",
    "JobSpec",
    "PushManyResult",
    "QueueInfo",
    "ServerInfo",
    "ServerStatus",
    "Totals",
    "WorkerState",
    "new_jid",
]

WorkerState = Literal["running", "quiet", "terminate"]


def check_args(args: object) -> None:
    """Refuse a string or mapping as ``args``: ``list("abc")`` would become three arguments."""
    if isinstance(args, str | bytes | dict):
        raise TypeError(f"args must be a list of arguments, not {type(args).__name__}")


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 text to an aware datetime (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _require_time(value: Any) -> datetime:
    parsed = parse_time(value)
    if parsed is None:
        raise ValueError("missing timestamp")
    return parsed


class Unique(msgspec.Struct, frozen=True, omit_defaults=True, rename={"for_": "for"}):
    """A push's unique lock: no other job with the same key is stored while one holds it.

    ``key`` names the lock; without it the server hashes jobtype, queue and args (or only the
    ``by`` paths, such as ``"args.0"`` or ``"custom.tenant"``). ``for_`` bounds the lock in
    seconds (from ``at`` for a scheduled job); ``until`` is ``"success"`` (held until acked,
    dead or expired) or ``"start"`` (until a worker takes the job). ``on_conflict`` says what a
    push meeting a holder does: ``"reject"`` raises ``NotUnique`` naming the holder,
    ``"existing"`` answers with the holder (``duplicate`` True), ``"replace"`` gives a waiting
    holder this push's args and ``at``.
    """

    for_: float | None = None
    until: str | None = None
    key: str | None = None
    by: Sequence[str] | None = None
    on_conflict: str | None = None

    def __post_init__(self) -> None:
        if self.by is not None and type(self.by) is not list:
            msgspec.structs.force_setattr(self, "by", list(self.by))

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = msgspec.to_builtins(self)
        return wire


@dataclass(frozen=True, slots=True)
class UniqueConflict:
    """An item of a batch whose unique key another job held: its place in the batch, the
    holder's jid (the item's jid in the answer) and what was done (its ``on_conflict``)."""

    index: int
    existing_jid: str
    on_conflict: str

    @classmethod
    def from_wire(cls, data: dict[str, Any], offset: int = 0) -> UniqueConflict:
        return cls(
            index=int(data["index"]) + offset,
            existing_jid=str(data["existing_jid"]),
            on_conflict=str(data["on_conflict"]),
        )


@dataclass(frozen=True, slots=True)
class Failure:
    """The last failure of a job, as the server recorded it."""

    retry_count: int
    remaining: int
    failed_at: datetime
    next_at: datetime | None
    errtype: str
    message: str
    backtrace: list[str]

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Failure:
        return cls(
            retry_count=int(data.get("retry_count", 0)),
            remaining=int(data.get("remaining", 0)),
            failed_at=_require_time(data.get("failed_at")),
            next_at=parse_time(data.get("next_at")),
            errtype=str(data.get("errtype", "")),
            message=str(data.get("message", "")),
            backtrace=[str(line) for line in data.get("backtrace") or []],
        )


@dataclass(frozen=True, slots=True)
class Dependency:
    """One dependency of a job pushed with ``depends_on``: how it ended (``outcome`` None: not
    yet; else ``completed``, ``dead``, ``expired``, ``cancelled``, ``skipped`` or ``deleted``)
    and, when it completed, its ``result``. ``result_omitted``: the answer left the result out
    (a server carries at most a budget of dependency results per answer; the worker reads the
    rest before the handler runs, ``Client.dependencies`` reads them all)."""

    jid: str
    ref: str | None = None
    on_failure: str = "fail"
    outcome: str | None = None
    result: Any = None
    settled_at: datetime | None = None
    result_omitted: bool = False

    @property
    def completed(self) -> bool:
        return self.outcome == "completed"


@dataclass(frozen=True, slots=True)
class Dependent:
    """A job depending on the one read (``Client.get``)."""

    jid: str
    state: str
    on_failure: str = "fail"


class Dependencies(Mapping[str, Dependency]):
    """A job's dependencies, by jid and by the ref that named each at push (``job.dependencies
    ["extract"].result``); iterating yields the jids."""

    __slots__ = ("_by_jid", "_by_ref")

    def __init__(self, items: Sequence[Dependency] = ()) -> None:
        self._by_jid = {d.jid: d for d in items}
        self._by_ref = {d.ref: d for d in items if d.ref is not None}

    def __getitem__(self, key: str) -> Dependency:
        found = self._by_jid.get(key) or self._by_ref.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_jid)

    def __len__(self) -> int:
        return len(self._by_jid)

    def results(self) -> dict[str, Any]:
        """Each completed dependency's result, keyed by its ref (or its jid without one)."""
        return {d.ref or d.jid: d.result for d in self._by_jid.values() if d.completed}

    def __repr__(self) -> str:
        return f"Dependencies({list(self._by_jid.values())!r})"


# Without __slots__: msgspec fills an instance's __dict__ in one go but sets a slotted field one
# at a time, and a worker decodes one record per job it fetches.
@dataclass(frozen=True)
class JobRecord:
    """A job as stored by the server (returned by push, get and fetch).

    ``lease`` is set on fetched jobs only (no read of a job shows it); ``progress`` holds the
    last checkpoint of a previous attempt, so a retried job can resume. ``created`` is set on
    the answer to ``push``: False when the jid existed already (nothing new was stored).
    ``dependencies_omitted``: ``dependencies`` lists only the first of them (a server lists at
    most a budget of dependencies per answer; the worker reads the rest before the handler
    runs, ``Client.dependencies`` reads them all).
    """

    jid: str
    jobtype: str
    args: list[Any] = field(default_factory=list)
    queue: str = "default"
    priority: int = 0
    reserve_for: int = 1800
    retry: int = 25
    backtrace: int = 0
    custom: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None
    state: str = ""
    created_at: datetime | None = None
    enqueued_at: datetime | None = None
    attempt: int = 0
    progress: Any = None
    failure: Failure | None = None
    lease: str | None = None
    lease_expires_at: datetime | None = None
    wid: str | None = None
    created: bool | None = None
    keep_result_for: int = 0
    result: Any = None
    completed_at: datetime | None = None
    expires_at: datetime | None = None
    unique: dict[str, Any] | None = None
    duplicate: bool = False
    dependencies: list[Dependency] | None = None
    dependencies_omitted: bool = False
    dependents: list[Dependent] | None = None
    batch: str | None = None

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> JobRecord:
        failure = data.get("failure")
        return cls(
            jid=str(data["jid"]),
            jobtype=str(data["jobtype"]),
            args=list(data.get("args") or []),
            queue=str(data.get("queue", "default")),
            priority=int(data.get("priority", 0)),
            reserve_for=int(data.get("reserve_for", 1800)),
            retry=int(data.get("retry", 25)),
            backtrace=int(data.get("backtrace", 0)),
            custom=dict(data.get("custom") or {}),
            at=parse_time(data.get("at")),
            state=str(data.get("state", "")),
            created_at=parse_time(data.get("created_at")),
            enqueued_at=parse_time(data.get("enqueued_at")),
            attempt=int(data.get("attempt", 0)),
            progress=data.get("progress"),
            failure=Failure.from_wire(failure) if isinstance(failure, dict) else None,
            lease=data.get("lease"),
            lease_expires_at=parse_time(data.get("lease_expires_at")),
            wid=data.get("wid"),
            created=data.get("created"),
            keep_result_for=int(data.get("keep_result_for") or 0),
            result=data.get("result"),
            completed_at=parse_time(data.get("completed_at")),
            expires_at=parse_time(data.get("expires_at")),
            unique=data.get("unique"),
            duplicate=bool(data.get("duplicate", False)),
            batch=data.get("batch"),
            dependencies=[
                Dependency(
                    jid=str(d["jid"]),
                    ref=d.get("ref"),
                    on_failure=str(d.get("on_failure", "fail")),
                    outcome=d.get("outcome"),
                    result=d.get("result"),
                    settled_at=parse_time(d.get("settled_at")),
                    result_omitted=bool(d.get("result_omitted", False)),
                )
                for d in data["dependencies"]
            ]
            if data.get("dependencies") is not None
            else None,
            dependencies_omitted=bool(data.get("dependencies_omitted", False)),
            dependents=[
                Dependent(str(d["jid"]), str(d["state"]), str(d.get("on_failure", "fail")))
                for d in data["dependents"]
            ]
            if data.get("dependents") is not None
            else None,
        )


@dataclass(frozen=True, slots=True)
class JobResult:
    """Where a job stands for whoever waits for its result (``Client.result``).

    ``done`` is True once the job is settled: ``state`` then says how (``completed``, with the
    ``result`` its ack stored; ``dead``, ``expired`` or ``cancelled``, with its ``failure`` if
    it failed). False means the wait ended first and the job may still run.
    """

    jid: str
    state: str
    done: bool
    result: Any = None
    completed_at: datetime | None = None
    failure: Failure | None = None

    @property
    def completed(self) -> bool:
        return self.state == "completed"


class JobSpec(msgspec.Struct, omit_defaults=True):
    """One job to push; ``jid`` is minted at construction so retries stay idempotent.

    A spec is its own push body: msgspec encodes it as it stands, fields left as ``None``
    omitted so the server's defaults apply. So construction puts each field in its wire form:
    ``args`` a list, an ``at`` given as a ``timedelta`` the time that far from now, the
    ``JobSpec`` of a dependency its jid, a ``unique`` mapping a dict; a naive datetime is refused.
    """

    jobtype: str
    args: list[Any] = msgspec.field(default_factory=list)
    queue: str | None = None
    at: datetime | timedelta | str | None = None
    retry: int | None = None
    reserve_for: int | None = None
    priority: int | None = None
    backtrace: int | None = None
    custom: dict[str, Any] | None = None
    jid: str = msgspec.field(default_factory=new_jid)
    keep_result_for: int | None = None
    unique: Unique | Mapping[str, Any] | None = None  # a mapping: the wire's own keys
    expires_at: datetime | str | None = None
    expires_in: float | None = None
    # Dependencies: the jobs this one waits for (jids, refs of the same request, or JobSpecs),
    # its policy when one ends badly ("fail", "skip", "ignore"), and its name in its request.
    depends_on: Sequence[str | JobSpec | Needs] | None = None
    on_dependency_failure: str | None = None
    ref: str | None = None
    batch: str | None = None  # the bid of an open batch it joins

    def __post_init__(self) -> None:
        if type(self.args) is not list:
            check_args(self.args)
            self.args = list(self.args)
        timeout = custom_timeout(self.custom)
        if timeout is not None:
            check_timeout(timeout, self.reserve_for, where=f"job {self.jobtype!r}")
        if self.at is not None and not isinstance(self.at, str):
            self.at = _aware(
                datetime.now(UTC) + self.at if isinstance(self.at, timedelta) else self.at
            )
        if self.expires_at is not None and not isinstance(self.expires_at, str):
            self.expires_at = _aware(self.expires_at)
        if self.unique is not None and not isinstance(self.unique, Unique):
            self.unique = dict(self.unique)
        if self.depends_on is not None:
            self.depends_on = [d.jid if isinstance(d, JobSpec) else d for d in self.depends_on]

    def to_wire(self) -> dict[str, Any]:
        """The push body as a dict."""
        wire: dict[str, Any] = msgspec.to_builtins(self)
        return wire


class Needs(msgspec.Struct, omit_defaults=True):
    """An entry of ``depends_on`` with a policy of its own for when that job ends badly
    (``on_failure``: ``"fail"``, ``"skip"`` or ``"ignore"``; None: the job's
    ``on_dependency_failure``). ``job`` is a jid, a ref of the same request, or a ``JobSpec``
    (its jid is taken)."""

    job: str | JobSpec
    on_failure: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.job, JobSpec):
            self.job = self.job.jid


def _aware(at: datetime) -> datetime:
    """A naive datetime is refused rather than guessed at: a wrong zone silently shifts a
    schedule by hours."""
    if at.tzinfo is None:
        raise ValueError("`at` must be timezone-aware (e.g. datetime.now(UTC) + delay)")
    return at


class Undecoded:
    """Jobs as the server sent them (JSON arrays of jobs), with the function that decodes them."""

    __slots__ = ("decode", "parts")

    def __init__(self, parts: list[bytes], decode: Callable[[bytes], list[JobRecord]]) -> None:
        self.parts = parts
        self.decode = decode


class _JobsOnRead:
    """``PushManyResult.jobs``: decoded when first read, so a producer that only wanted its
    jobs stored builds no objects for them."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}"

    @overload
    def __get__(self, obj: None, owner: type) -> _JobsOnRead: ...

    @overload
    def __get__(self, obj: object, owner: type) -> list[JobRecord]: ...

    def __get__(self, obj: object | None, owner: type) -> list[JobRecord] | _JobsOnRead:
        if obj is None:
            raise AttributeError("no default")  # the dataclass field is required
        value = obj.__dict__[self._slot]
        if isinstance(value, Undecoded):
            jobs: list[JobRecord] = []
            for part in value.parts:
                jobs.extend(value.decode(part))
            obj.__dict__[self._slot] = value = jobs
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: list[JobRecord] | Undecoded) -> None:
        obj.__dict__[self._slot] = value


@dataclass(frozen=True)
class PushManyResult:
    """Jobs stored by ``push_many`` (in input order) and how many were new, their jids (in
    input order) and those stored already (nothing new stored for them). An item whose unique
    key another job held is answered by that job, and listed in ``conflicts``."""

    jobs: _JobsOnRead = _JobsOnRead()  # required: the descriptor gives no default
    created: int  # type: ignore[misc]
    conflicts: list[UniqueConflict] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)  # each item's ref -> its jid
    jids: list[str] = field(default_factory=list)
    existed: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PushJidsResult:
    """What ``push_jids`` stored: every jid (in input order), how many were new, and the jids
    that were stored already (nothing new stored for them)."""

    jids: list[str]
    created: int
    existed: list[str]
    conflicts: list[UniqueConflict] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)  # each item's ref -> its jid


@dataclass(frozen=True, slots=True)
class AckManyResult:
    """Outcome of a batch ack: jids acknowledged, and jids whose lease was no longer ours."""

    acked: list[str] = field(default_factory=list)
    lease_lost: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FailResult:
    """Where a failed job went: ``scheduled`` (will retry at ``next_at``), ``dead`` or
    ``discarded``."""

    jid: str
    state: str
    next_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ExtendResult:
    """The new expiry of an extended lease."""

    jid: str
    lease_expires_at: datetime


@dataclass(frozen=True, slots=True)
class ServerStatus:
    version: str
    uptime_seconds: float
    now: datetime | None


@dataclass(frozen=True, slots=True)
class Totals:
    processed: int
    failed: int
    enqueued: int


@dataclass(frozen=True, slots=True)
class QueueInfo:
    name: str
    size: int
    latency_seconds: float
    paused: bool


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """``GET /v1/info``: the Faktory INFO equivalent."""

    server: ServerStatus
    totals: Totals
    states: dict[str, int]
    queues: list[QueueInfo]
    workers: int

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ServerInfo:
        server = data.get("server") or {}
        totals = data.get("totals") or {}
        return cls(
            server=ServerStatus(
                version=str(server.get("version", "")),
                uptime_seconds=float(server.get("uptime_seconds", 0)),
                now=parse_time(server.get("now")),
            ),
            totals=Totals(
                processed=int(totals.get("processed", 0)),
                failed=int(totals.get("failed", 0)),
                enqueued=int(totals.get("enqueued", 0)),
            ),
            states={str(k): int(v) for k, v in (data.get("states") or {}).items()},
            queues=[
                QueueInfo(
                    name=str(q.get("name", "")),
                    size=int(q.get("size", 0)),
                    latency_seconds=float(q.get("latency_seconds") or 0),
                    paused=bool(q.get("paused", False)),
                )
                for q in data.get("queues") or []
            ],
            workers=int(data.get("workers", 0)),
        )


@dataclass(frozen=True, slots=True)
class BatchCallback:
    """A batch's callback job: its jid and state (``waiting`` until its condition is met; None
    once it is no longer stored)."""

    jid: str
    state: str | None = None


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """How a batch stands. ``state``: ``open`` (members may join), ``committed``, ``finished``
    (committed with every member settled). Members are jobs and child batches: ``succeeded``
    completed, ``dead`` ended without completing (a retried one is pending again), ``pending``
    the rest."""

    bid: str
    state: str
    total: int
    pending: int
    succeeded: int
    dead: int
    description: str | None = None
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    committed_at: datetime | None = None
    completed_at: datetime | None = None
    succeeded_at: datetime | None = None
    died_at: datetime | None = None
    on_complete: BatchCallback | None = None
    on_success: BatchCallback | None = None
    on_death: BatchCallback | None = None
