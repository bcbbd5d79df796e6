"""Wire models. They validate what comes in; responses are rendered by ``views``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired

from fastapi import Path
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    WithJsonSchema,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict  # typing.TypedDict: pydantic needs Python 3.12

from werk.config import Settings
from werk.domain import job as rules
from werk.domain.job import JobSpec
from werk.domain.times import OUT_OF_RANGE, check_time

MAX_JSON_DEPTH = 64
INT64 = 2**63
NO_NUL = r"^[^\x00]*$"


def _check_text(text: str) -> str:
    if "\x00" in text:
        raise ValueError("text must not contain NUL (\\u0000) characters")
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    return text


def _check_scalar(item: Any) -> None:
    if isinstance(item, str):
        _check_text(item)
    elif isinstance(item, bool) or item is None:
        return
    elif isinstance(item, int):
        if not -INT64 <= item < INT64:
            raise ValueError("integers must fit in 64 bits")
    elif isinstance(item, float) and not math.isfinite(item):
        raise ValueError("numbers must be finite (no NaN or Infinity)")


def check_json(value: Any) -> Any:
    """Rejects what PostgreSQL's jsonb cannot store faithfully: NUL characters, NaN/Infinity,
    integers beyond 64 bits, and nesting deeper than MAX_JSON_DEPTH."""
    if value:  # (most args and custom are empty: no call for them)
        _check_container(value, 1)
    return value


def _check_container(container: Any, depth: int) -> None:
    # Parsed JSON holds exact builtin types, so ``type(...) is`` picks the common cases at a
    # fraction of isinstance's cost; anything else takes _check_scalar's general path.
    items: Iterable[Any]
    kind = type(container)
    if kind is list:
        items = container
    elif kind is dict:
        for key in container:
            _check_text(key)
        items = container.values()
    else:
        _check_scalar(container)
        return
    if depth >= MAX_JSON_DEPTH and container:  # its items would sit deeper
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    for item in items:
        kind = type(item)
        if kind is list or kind is dict:
            _check_container(item, depth + 1)
        elif kind is not bool and item is not None:
            _check_scalar(item)


def _integral(value: Any) -> Any:
    """JSON has one number type and JSON Schema counts 31.0 as an integer (FWP accepts it too)."""
    return int(value) if type(value) is float and value.is_integer() else value


# After a request integer's bounds (pydantic states bounds before a validator wrongly in the
# schema): strict still (no strings, no booleans), but a number with no fraction counts.
INTEGRAL = BeforeValidator(_integral)


def _time_text(value: Any) -> Any:
    """Lax parsing turns a string into a time, but a number is no time (FWP agrees)."""
    if value is not None and not isinstance(value, str | datetime):
        raise ValueError("a time is an RFC 3339 string, e.g. 2030-01-02T03:04:05Z")
    return value


# What check_json accepts, in words: JSON Schema could say it only recursively, which several
# client generators cannot read (tests/contract/test_schemathesis.py states it as a schema).
JSON_LIMITS = (
    "Any JSON that PostgreSQL's jsonb keeps exactly: text without NUL (\\u0000), integers within "
    f"64 bits, finite numbers, nested at most {MAX_JSON_DEPTH} levels."
)
Json = Annotated[Any, AfterValidator(check_json)]
JsonArray = Annotated[list[Any], AfterValidator(check_json), Field(description=JSON_LIMITS)]
JsonObject = Annotated[dict[str, Any], AfterValidator(check_json), Field(description=JSON_LIMITS)]
# The rule _check_text enforces, stated in the schema (validation stays _check_text's).
Text = Annotated[str, AfterValidator(_check_text), Field(json_schema_extra={"pattern": NO_NUL})]
QueueName = Annotated[str, StringConstraints(pattern=rules.QUEUE_PATTERN)]
# The jid of a job to store.
Jid = Annotated[
    str,
    StringConstraints(
        min_length=rules.JID_MIN_LENGTH,
        max_length=rules.JID_MAX_LENGTH,
        pattern=rules.JID_PATTERN,
    ),
]
# The jid of a stored job in a body: any the database may hold (its CHECK bounds the length
# only), so a batch ack can settle every stored job, whatever its jid.
StoredJid = Annotated[
    Text, StringConstraints(min_length=rules.JID_MIN_LENGTH, max_length=rules.JID_MAX_LENGTH)
]
Wid = Annotated[Text, StringConstraints(min_length=1, max_length=100)]
# A path segment naming a job.
JidInPath = Annotated[
    str, Path(min_length=1, max_length=rules.JID_MAX_LENGTH, pattern=rules.JID_PATTERN)
]


# Many generated clients send an optional field they were not given as null: in every request
# body, null on an optional field means "not given" (its default applies), and the schema
# declares those fields nullable so that such clients may.


def without_nulls(data: Any, optional: Iterable[str]) -> Any:
    """``data`` (a request body) without the ``optional`` keys whose value is null."""
    if type(data) is dict and None in data.values():  # (parsed JSON: no value equals None)
        keep = set(data) - set(optional)
        return {k: v for k, v in data.items() if v is not None or k in keep}
    return data


def _declare_nulls(schema: dict[str, Any], *_: Any) -> None:
    """json_schema_extra of request bodies: each optional property also allows null."""
    required = set(schema.get("required", ()))
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    for name, prop in properties.items():
        meta: dict[str, Any] = {
            k: prop[k] for k in ("title", "description", "default") if k in prop
        }
        shape = {k: v for k, v in prop.items() if k not in meta}
        alternatives = shape.get("anyOf", [shape])
        if name in required or not shape or {"type": "null"} in alternatives:
            continue  # required, any JSON value (null included), or nullable already
        properties[name] = {"anyOf": [shape, {"type": "null"}], **meta}


_STRICT = ConfigDict(strict=True, extra="forbid", json_schema_extra=_declare_nulls)


class StrictBody(BaseModel):
    """A request body of required fields only: strict, no unknown keys."""

    model_config = _STRICT


class RequestBody(StrictBody):
    """A request body with optional fields: null on one means not given. (Its validator reads
    the body as Python objects, not straight from JSON: a body of required fields only, such as
    a batch, is a StrictBody and does not pay for that.)"""

    @model_validator(mode="before")
    @classmethod
    def _null_means_not_given(cls, data: Any) -> Any:
        return without_nulls(data, (n for n, f in cls.model_fields.items() if not f.is_required()))


def _absent_means(default: Any, **constraints: Any) -> Any:
    """The Field of a key a job may leave out: the schema states the default that JobSpec then
    applies (tests/test_push.py checks the two agree)."""
    return Field(json_schema_extra={"default": default}, **constraints)


# A dict, not a model: validating a batch of 1,000 then builds no model object per job (with the
# conversion to JobSpec 9.85 against 5.63 us per job).
@with_config(_STRICT)
class JobPush(TypedDict):
    """A job to push. Only ``jobtype`` is required."""

    jid: NotRequired[
        Annotated[
            Jid,
            _absent_means(
                None,
                description="Unique id; generated when absent. Re-pushing an "
                "existing jid stores nothing new and returns the stored job.",
            ),
        ]
    ]
    jobtype: Annotated[Text, Field(min_length=1, max_length=rules.JOBTYPE_MAX_LENGTH)]
    args: NotRequired[JsonArray]
    queue: NotRequired[Annotated[QueueName, _absent_means("default")]]
    priority: NotRequired[
        Annotated[
            int,
            _absent_means(
                0,
                ge=rules.PRIORITY_MIN,
                le=rules.PRIORITY_MAX,
                description="Higher runs first within a queue.",
            ),
            INTEGRAL,
        ]
    ]
    reserve_for: NotRequired[
        Annotated[
            int,
            _absent_means(
                rules.RESERVE_FOR_DEFAULT,
                ge=rules.RESERVE_FOR_MIN,
                le=rules.RESERVE_FOR_MAX,
                description="Seconds a fetched job stays leased before it expires.",
            ),
            INTEGRAL,
        ]
    ]
    # Not strict: the body arrives as parsed JSON, where a time is an RFC 3339 string.
    at: NotRequired[
        Annotated[
            Annotated[AwareDatetime, AfterValidator(check_time)],
            _absent_means(
                None,
                strict=False,
                description="Run no earlier than this (RFC 3339 with a time zone); it "
                f"{OUT_OF_RANGE}.",
            ),
            BeforeValidator(_time_text),
        ]
    ]
    retry: NotRequired[
        Annotated[
            int,
            _absent_means(
                rules.RETRY_DEFAULT,
                ge=rules.RETRY_MIN,
                le=rules.RETRY_MAX,
                description="Retries before dead; 0 discards on failure, -1 is dead on the "
                "first failure.",
            ),
            INTEGRAL,
        ]
    ]
    backtrace: NotRequired[
        Annotated[int, _absent_means(0, ge=0, le=rules.BACKTRACE_MAX_LINES), INTEGRAL]
    ]
    custom: NotRequired[JsonObject]


# (``__optional_keys__`` misses NotRequired in the postponed annotations of this module.)
_JOB_OPTIONAL = frozenset(JobPush.__annotations__) - set(
    TypeAdapter(JobPush).json_schema()["required"]
)
# The pushed job as routes take it: JobPush with its null optional keys dropped (RequestBody's
# rule; a TypedDict has no validators of its own).
JobPushBody = Annotated[JobPush, BeforeValidator(lambda data: without_nulls(data, _JOB_OPTIONAL))]

DEFAULT_MAX_BATCH: int = Settings.model_fields["max_batch"].default
_MAX_BATCH = (
    f"At most `WERK_MAX_BATCH` items ({DEFAULT_MAX_BATCH:,} unless configured); a larger batch "
    "is refused with a 422 that names the server's limit."
)


class JobBatchPush(StrictBody):
    # The limit is the server's setting, checked by the route (so its answer names it); the
    # schema states the default.
    jobs: list[JobPushBody] = Field(
        min_length=1, json_schema_extra={"maxItems": DEFAULT_MAX_BATCH}, description=_MAX_BATCH
    )

    def specs(self) -> list[JobSpec]:
        return [JobSpec(**job) for job in self.jobs]


class Failure(BaseModel):
    retry_count: int
    remaining: int
    failed_at: datetime
    next_at: datetime | None
    errtype: str
    message: str
    backtrace: list[str]


class Job(BaseModel):
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


class FetchedJob(Job):
    """A job as its fetch hands it over: only here is the lease given, to the worker that holds
    it (it is the holder's secret; no read of the job shows it)."""

    lease: str = Field(description="Sent with ack, fail and extend of this attempt.")


class PushedJob(Job):
    """The answer to a push: the job as stored."""

    created: bool = Field(
        description="false: the jid existed already; nothing new was stored and this is the "
        "stored job."
    )


class JobBatchPushed(BaseModel):
    """The answer to a batch push. `jobs` (the stored jobs, in the order pushed) is left out
    when the request says `Prefer: return=minimal`."""

    jids: list[str] = Field(
        description="Every job's jid, in the order pushed (generated ones too)."
    )
    created: int = Field(description="How many jobs this push stored.")
    existed: list[str] = Field(
        description="The jids that were stored already (nothing new stored)."
    )
    jobs: list[Job] = Field(default_factory=list, description="Absent with `return=minimal`.")


# RFC 7240: a server ignores preferences it does not know, so any value is taken; the schema
# names the ones that change the answer.
Prefer = Annotated[
    str | None,
    WithJsonSchema({"type": "string", "enum": ["return=minimal", "return=representation"]}),
]


class Fetch(RequestBody):
    queues: list[QueueName] = Field(
        min_length=1, max_length=100, description="Tried strictly in this order."
    )
    wid: Wid
    count: Annotated[int, Field(ge=1, le=rules.FETCH_MAX_COUNT), INTEGRAL] = 1
    wait: float = Field(
        0,
        ge=0,
        description="Seconds to long-poll for a job (server maximum applies, 30 by default).",
    )


class Fetched(BaseModel):
    jobs: list[FetchedJob]


class Lease(StrictBody):
    lease: Annotated[str, StringConstraints(min_length=1, max_length=rules.LEASE_MAX_LENGTH)]


# A dict, not a model: validating a batch then builds no model object per item, which was 30 %
# of the batch's validation (1.75 against 1.23 us per item, batches of 100).
@with_config(_STRICT)
class AckItem(TypedDict):
    jid: StoredJid
    lease: Annotated[str, StringConstraints(min_length=1, max_length=rules.LEASE_MAX_LENGTH)]


class AckBatch(StrictBody):
    acks: list[AckItem] = Field(
        min_length=1, json_schema_extra={"maxItems": DEFAULT_MAX_BATCH}, description=_MAX_BATCH
    )

    def pairs(self) -> list[tuple[str, str]]:
        return [(a["jid"], a["lease"]) for a in self.acks]


class AckBatchResult(BaseModel):
    acked: list[str]
    lease_lost: list[str]


class FailReport(RequestBody):
    lease: Annotated[str, StringConstraints(min_length=1, max_length=rules.LEASE_MAX_LENGTH)]
    errtype: Annotated[Text, Field(max_length=rules.ERRTYPE_MAX_LENGTH)] = "unknown"
    message: Annotated[Text, Field(max_length=rules.MESSAGE_MAX_LENGTH)] = ""
    backtrace: list[Annotated[Text, Field(max_length=10_000)]] = Field(
        default_factory=list, max_length=rules.BACKTRACE_MAX_LINES
    )
    retry_in: float | None = Field(
        None,
        ge=0,
        le=365 * 86400,
        description="Retry after this many seconds instead of the backoff.",
    )
    retry: Literal[False] | None = Field(None, description="false: do not retry; the job is dead.")


class FailResult(BaseModel):
    jid: str
    state: Literal["scheduled", "dead", "discarded"]
    next_at: datetime | None


class Extend(RequestBody):
    lease: Annotated[str, StringConstraints(min_length=1, max_length=rules.LEASE_MAX_LENGTH)]
    reserve_for: (
        Annotated[int, Field(ge=rules.RESERVE_FOR_MIN, le=rules.RESERVE_FOR_MAX), INTEGRAL] | None
    ) = None
    progress: Json = Field(
        None,
        description="A checkpoint the next attempt receives as `progress` if this one does not "
        f"finish (null or absent: the last checkpoint stays). {JSON_LIMITS}",
    )


class Extended(BaseModel):
    jid: str
    lease_expires_at: datetime


class Beat(RequestBody):
    wid: Wid
    hostname: Annotated[Text, Field(max_length=255)] = ""
    pid: Annotated[int, Field(ge=0, le=2**31 - 1), INTEGRAL] | None = None
    labels: list[Annotated[Text, Field(max_length=100)]] = Field(
        default_factory=list, max_length=100
    )
    # Not strict: an enum arrives from JSON as its string value.
    current_state: rules.WorkerState | None = Field(
        None, strict=False, description="What the worker says it is doing."
    )
    # A bound well inside 2**53, so clients that hold numbers as doubles compare it exactly.
    rss_kb: Annotated[int, Field(ge=0, le=2**50), INTEGRAL] | None = None


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


# Every error is a Problem; documented per route so generated clients parse it (FastAPI's own
# 422 schema, HTTPValidationError, is never what the server sends).
INVALID_REQUEST: dict[int | str, dict[str, Any]] = {
    422: {"model": Problem, "description": "invalid_request"}
}
