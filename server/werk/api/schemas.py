"""Wire models. They validate what comes in; responses are rendered by ``views``."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

import msgspec
from fastapi import Path
from pydantic import BaseModel, Field, WithJsonSchema

from werk.config import Settings
from werk.domain import job as rules
from werk.domain.bodies import (
    JSON_LIMITS,
    Body,
    InvalidField,
    JobPush,
    MQueueName,
    MText,
    Nullable,
    ReserveFor,
    checked_json,
    integer,
    integral,
    texts,
    with_defaults,
)

# The jid of a stored job in a body: any the database may hold (its CHECK bounds the length
# only), so a batch ack can settle every stored job, whatever its jid.
StoredJid = Annotated[
    MText, msgspec.Meta(min_length=rules.JID_MIN_LENGTH, max_length=rules.JID_MAX_LENGTH)
]
Wid = Annotated[MText, msgspec.Meta(min_length=1, max_length=100)]
Lease = Annotated[MText, msgspec.Meta(min_length=1, max_length=rules.LEASE_MAX_LENGTH)]
if TYPE_CHECKING:  # integer(): an int once the body's __post_init__ ran
    FetchCount: TypeAlias = int
    Pid: TypeAlias = int
    RssKb: TypeAlias = int
else:
    FetchCount = integer(1, rules.FETCH_MAX_COUNT)
    Pid = integer(0, 2**31 - 1)
    RssKb = integer(0, rules.RSS_KB_MAX)
# A path segment naming a job.
JidInPath = Annotated[
    str, Path(min_length=1, max_length=rules.JID_MAX_LENGTH, pattern=rules.JID_PATTERN)
]


DEFAULT_MAX_BATCH: int = Settings.model_fields["max_batch"].default
_MAX_BATCH = (
    f"At most `WERK_MAX_BATCH` items ({DEFAULT_MAX_BATCH:,} unless configured); a larger batch "
    "is refused with a 422 that names the server's limit."
)


class JobBatchPush(Body):
    # The limit is the server's setting, checked by the route (so its answer names it); the
    # schema states the default.
    jobs: Annotated[
        list[JobPush],
        msgspec.Meta(
            min_length=1, extra_json_schema={"maxItems": DEFAULT_MAX_BATCH}, description=_MAX_BATCH
        ),
    ]


class Failure(BaseModel):
    retry_count: int
    remaining: int
    failed_at: datetime
    next_at: datetime | None
    errtype: str
    message: str
    backtrace: list[str]


class UniqueShown(BaseModel):
    """A job's unique lock as it was asked for, its key resolved."""

    key: str
    until: rules.UniqueUntil
    on_conflict: rules.OnConflict
    for_: float | None = Field(None, alias="for", description="Absent: no time bound.")
    by: list[str] | None = Field(None, description="Absent: the key hashes all args.")


class Dependency(BaseModel):
    """One dependency of a job and how it ended."""

    jid: str
    ref: str | None = Field(description="The ref that named it at push (null: its jid).")
    on_failure: rules.DependencyPolicy
    outcome: Literal["completed", "dead", "expired", "cancelled", "skipped", "deleted"] | None = (
        Field(description="null: not settled yet.")
    )
    result: Any = Field(
        description="Its result, when it completed with one (null when `result_omitted`)."
    )
    settled_at: datetime | None
    result_omitted: bool = Field(
        False,
        description="Present (true) when the answer left the result out: the results one "
        "answer carries add up to at most `WERK_MAX_DEPENDENCY_RESULTS_BYTES` (1 MiB unless "
        "configured). Read it with `GET /v1/jobs/{jid}/dependencies`.",
    )


class DependencyPage(BaseModel):
    """A page of a job's dependencies in jid order, each with its result."""

    dependencies: list[Dependency] = Field(
        description="As many as the page's budget of result bytes holds, and at least one when "
        "any remain."
    )
    next: str | None = Field(description="The `cursor` of the next page; null: this was the last.")


class Dependent(BaseModel):
    """A job depending on this one."""

    jid: str
    state: rules.JobState
    on_failure: rules.DependencyPolicy


class JobAttempt(BaseModel):
    """What every view of a job shows: the job as pushed and its current attempt."""

    jid: str
    jobtype: str
    args: list[Any]
    queue: str
    priority: int
    reserve_for: int
    retry: int
    backtrace: int
    custom: dict[str, Any]
    at: datetime | None
    state: rules.JobState
    created_at: datetime
    enqueued_at: datetime | None
    attempt: int
    progress: Any = Field(description="The last checkpoint recorded with extend (null: none).")
    failure: Failure | None
    lease_expires_at: datetime | None
    wid: str | None
    dependencies: list[Dependency] | None = Field(
        None,
        description="A job pushed with `depends_on`, as fetched or read alone: its "
        "dependencies, each with its outcome and result (absent otherwise).",
    )
    dependencies_omitted: bool = Field(
        False,
        description="Present (true) when `dependencies` lists only the first of the job's "
        "dependencies (in jid order), or none: one answer lists at most "
        "`WERK_MAX_DEPENDENCIES_LISTED` (10,000 unless configured), counted across its jobs in "
        "jid order. Read the rest with `GET /v1/jobs/{jid}/dependencies`, from the last one "
        "listed on.",
    )
    batch: str | None = Field(None, description="The batch the job is a member of (absent: none).")


_KEEP_RESULT_FOR = (
    "Seconds the job stays readable as completed after its ack (0: deleted at ack unless the "
    "server keeps every completed job)."
)
_EXPIRES_AT = "Never run after this; a job not started by then becomes `expired`."


class Job(JobAttempt):
    keep_result_for: int = Field(description=_KEEP_RESULT_FOR)
    result: Any = Field(description="What the ack stored (null: nothing, or not completed).")
    completed_at: datetime | None = Field(description="When it was acked (completed jobs only).")
    expires_at: datetime | None = Field(description=_EXPIRES_AT)
    unique: UniqueShown | None = Field(
        description="The unique lock the job was pushed with (null: none)."
    )
    dependents: list[Dependent] | None = Field(
        None,
        description="A job others depend on, read alone: those jobs (the first 1,000; absent "
        "otherwise).",
    )


class JobResult(BaseModel):
    """Where a job stands for whoever waits for its result."""

    jid: str
    state: rules.JobState
    done: bool = Field(
        description="true: the job is settled (completed, dead, expired or cancelled) and this "
        "is its outcome; false: it may still run (the wait ended first)."
    )
    result: Any = Field(description="What the ack stored (completed jobs; null: nothing).")
    completed_at: datetime | None
    failure: Failure | None = Field(description="The last failure (a dead job's says why).")


class JobBrief(JobAttempt):
    """A job as fetches and pushes answer it: the job's retention, expiry and unique lock are
    given only when it has them (`GET /v1/jobs/{jid}` shows every field)."""

    keep_result_for: int = Field(0, description=f"{_KEEP_RESULT_FOR} Absent: 0.")
    expires_at: datetime | None = Field(None, description=f"{_EXPIRES_AT} Absent: none.")
    unique: UniqueShown | None = Field(
        None, description="The unique lock the job was pushed with (absent: none)."
    )


class FetchedJob(JobBrief):
    """A job as its fetch hands it over: what the attempt needs. Only here is the lease given, to
    the worker that holds it (it is the holder's secret; no read of the job shows it). An active
    job has no result."""

    lease: str = Field(description="Sent with ack, fail and extend of this attempt.")


class StoredJob(JobBrief):
    """A pushed job as stored. Its result and completion are given only once it completed (a jid
    pushed again while its completed job is kept)."""

    result: Any = Field(None, description="What the ack stored (absent: not completed).")
    completed_at: datetime | None = Field(
        None, description="When it was acked (absent: not completed)."
    )


class PushedJob(StoredJob):
    """The answer to a push: the job as stored."""

    created: bool = Field(
        description="false: the jid existed already, or another job held the unique key; "
        "nothing new was stored and this is the stored job."
    )
    duplicate: bool = Field(
        False,
        description="true (status 200): another job held the unique key; this is that job, "
        "after taking this push's `args` and `at` with `on_conflict: replace`.",
    )


class UniqueConflict(BaseModel):
    """A batch item whose unique key another job held."""

    index: int = Field(description="The item's place in the batch, from 0.")
    existing_jid: str = Field(description="The job holding the key: the item's `jids` entry.")
    on_conflict: rules.OnConflict = Field(
        description="What was done: `reject` (nothing stored for the item), `existing`, or "
        "`replace` (the holder took the item's `args` and `at`)."
    )


class JobBatchPushed(BaseModel):
    """The answer to a batch push. `jobs` (the stored jobs, in the order pushed) is left out
    when the request says `Prefer: return=minimal`."""

    jids: list[str] = Field(
        description="Every job's jid, in the order pushed (generated ones too); for an item "
        "whose unique key another job held, that job's."
    )
    created: int = Field(description="How many jobs this push stored.")
    existed: list[str] = Field(
        description="The jids that were stored already (nothing new stored)."
    )
    jobs: list[StoredJob] = Field(default_factory=list, description="Absent with `return=minimal`.")
    conflicts: list[UniqueConflict] = Field(
        default_factory=list,
        description="Items whose unique key another job held (absent: none); their `jids` and "
        "`jobs` entries are the holder.",
    )
    refs: dict[str, str] = Field(
        default_factory=dict,
        description="Each item's `ref` mapped to its jid (absent: no item had a ref).",
    )


# RFC 7240: a server ignores preferences it does not know, so any value is taken; the schema's
# examples name the ones that change the answer.
Prefer = Annotated[
    str | None,
    WithJsonSchema({"type": "string", "examples": ["return=minimal", "return=representation"]}),
]


class Fetch(Body):
    queues: Annotated[
        list[MQueueName],
        msgspec.Meta(min_length=1, max_length=100, description="Tried strictly in this order."),
    ]
    wid: Wid
    count: Nullable[FetchCount] = 1
    wait: Annotated[
        Nullable[Annotated[float, msgspec.Meta(ge=0)]],
        msgspec.Meta(
            description="Seconds to long-poll for a job (server maximum applies, 30 by default)."
        ),
    ] = 0

    def __post_init__(self) -> None:
        if self.count is None or self.wait is None:
            with_defaults(self, ("count", "wait"))
        texts(self, ("wid",))
        self.count = integral(self.count, "count")


class Fetched(BaseModel):
    jobs: list[FetchedJob]


_RESULT = (
    "What the job produced, stored with the completed job when it is kept (pushed with "
    "`keep_result_for`, or the server keeps every completed job); null or absent: nothing. At "
    "most `WERK_MAX_RESULT_BYTES` of JSON (64 KiB unless configured): a larger one is refused "
    f"with 413 `result_too_large`. {JSON_LIMITS}"
)


class Ack(Body):
    lease: Lease
    result: Annotated[Any, msgspec.Meta(description=_RESULT)] = None

    def __post_init__(self) -> None:
        texts(self, ("lease",))
        if self.result is not None:
            checked_json(self.result, "result")


class AckItem(Body):
    jid: StoredJid
    lease: Lease
    result: Annotated[Any, msgspec.Meta(description=_RESULT)] = None

    def __post_init__(self) -> None:
        if "\x00" in self.jid:
            texts(self, ("jid",))
        texts(self, ("lease",))
        if self.result is not None:
            checked_json(self.result, "result")


class AckBatch(Body):
    acks: Annotated[
        list[AckItem],
        msgspec.Meta(
            min_length=1, extra_json_schema={"maxItems": DEFAULT_MAX_BATCH}, description=_MAX_BATCH
        ),
    ]

    def pairs(self) -> list[tuple[str, str]]:
        return [(a.jid, a.lease) for a in self.acks]

    def results(self) -> dict[tuple[str, str], Any]:
        """Per (jid, lease), the result its item carries (items without one are left out)."""
        return {(a.jid, a.lease): a.result for a in self.acks if a.result is not None}


class AckBatchResult(BaseModel):
    acked: list[str]
    lease_lost: list[str]


class FailReport(Body):
    lease: Lease
    errtype: Nullable[Annotated[MText, msgspec.Meta(max_length=rules.ERRTYPE_MAX_LENGTH)]] = (
        "unknown"
    )
    message: Nullable[Annotated[MText, msgspec.Meta(max_length=rules.MESSAGE_MAX_LENGTH)]] = ""
    backtrace: Nullable[
        Annotated[
            list[Annotated[MText, msgspec.Meta(max_length=10_000)]],
            msgspec.Meta(max_length=rules.BACKTRACE_MAX_LINES),
        ]
    ] = msgspec.field(default_factory=list)
    retry_in: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=365 * 86400)] | None,
        msgspec.Meta(description="Retry after this many seconds instead of the backoff."),
    ] = None
    # JSON Schema's const; msgspec's Literal takes no booleans.
    retry: Annotated[
        Annotated[bool, msgspec.Meta(extra_json_schema={"const": False})] | None,
        msgspec.Meta(description="false: do not retry; the job is dead."),
    ] = None

    def __post_init__(self) -> None:
        if self.errtype is None or self.message is None or self.backtrace is None:
            with_defaults(self, ("errtype", "message", "backtrace"))
        texts(self, ("lease", "errtype", "message", "backtrace"))
        if self.retry:
            raise InvalidField("retry", "Input should be False")


class FailResult(BaseModel):
    jid: str
    state: Literal["scheduled", "dead", "discarded"]
    next_at: datetime | None


class Extend(Body):
    lease: Lease
    reserve_for: ReserveFor | None = None
    progress: Annotated[
        Any,
        msgspec.Meta(
            description="A checkpoint the next attempt receives as `progress` if this one does "
            f"not finish (null or absent: the last checkpoint stays). {JSON_LIMITS}"
        ),
    ] = None

    def __post_init__(self) -> None:
        texts(self, ("lease",))
        if self.reserve_for is not None:
            self.reserve_for = integral(self.reserve_for, "reserve_for")
        if self.progress is not None:
            checked_json(self.progress, "progress")


class Extended(BaseModel):
    jid: str
    lease_expires_at: datetime


class Beat(Body):
    wid: Wid
    hostname: Nullable[Annotated[MText, msgspec.Meta(max_length=255)]] = ""
    pid: Pid | None = None
    labels: Nullable[
        Annotated[
            list[Annotated[MText, msgspec.Meta(max_length=100)]], msgspec.Meta(max_length=100)
        ]
    ] = msgspec.field(default_factory=list)
    current_state: Annotated[
        rules.WorkerState | None, msgspec.Meta(description="What the worker says it is doing.")
    ] = None
    rss_kb: RssKb | None = None

    def __post_init__(self) -> None:
        if self.hostname is None or self.labels is None:
            with_defaults(self, ("hostname", "labels"))
        texts(self, ("wid", "hostname", "labels"))
        if self.pid is not None:
            self.pid = integral(self.pid, "pid")
        if self.rss_kb is not None:
            self.rss_kb = integral(self.rss_kb, "rss_kb")


class BeatReply(BaseModel):
    state: rules.WorkerState


class QueueInfo(BaseModel):
    name: str
    size: int
    latency_seconds: float
    paused: bool


class ServerInfo(BaseModel):
    version: str
    uptime_seconds: float
    now: datetime


class Totals(BaseModel):
    processed: int
    failed: int
    enqueued: int


class Info(BaseModel):
    server: ServerInfo
    totals: Totals
    states: dict[str, int]
    queues: list[QueueInfo]
    workers: int


class ProblemFieldError(BaseModel):
    """One invalid field of a rejected request: where it is (``jobs.3.queue``) and what is wrong."""

    loc: str
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details, with Werk's stable machine ``code``."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    errors: list[ProblemFieldError] | None = None


class NotUniqueProblem(Problem):
    """A push's conflict: `not_unique` (another job holds the pushed job's unique key), or
    `batch_committed` / `batch_finished` (the batch it names takes no members now)."""

    existing_jid: str | None = Field(
        None, description="`not_unique`: the job holding the key (absent otherwise)."
    )


# Every error is a Problem; documented per route so generated clients parse it (FastAPI's own
# 422 schema, HTTPValidationError, is never what the server sends).
INVALID_REQUEST: dict[int | str, dict[str, Any]] = {
    422: {"model": Problem, "description": "invalid_request"}
}
