"""The pushed job as every adapter takes it: one model, validated by the HTTP routes (and stated
in their OpenAPI document) and by FWP's PUSH and PUSHB, with the field types the other request
bodies share."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, Optional, TypeAlias, TypeVar

import msgspec
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    with_config,
)
from typing_extensions import TypedDict, get_type_hints  # typing.TypedDict: pydantic needs 3.12

from werk.domain import job as rules
from werk.domain.json_values import INT64, MAX_JSON_DEPTH, NO_NUL, check_json
from werk.domain.times import OUT_OF_RANGE, check_time


def _integral(value: Any) -> Any:
    """JSON has one number type and JSON Schema counts 31.0 as an integer."""
    return int(value) if type(value) is float and value.is_integer() else value


# After a request integer's bounds (pydantic states bounds before a validator wrongly in the
# schema): strict still (no strings, no booleans), but a number with no fraction counts.
INTEGRAL = BeforeValidator(_integral)


def _time_text(value: Any) -> Any:
    """Lax parsing turns a string into a time, but a number is no time."""
    if value is not None and not isinstance(value, str | datetime):
        raise ValueError("a time is an RFC 3339 string, e.g. 2030-01-02T03:04:05Z")
    return value


# What check_json accepts, in words: JSON Schema could say it only recursively, which several
# client generators cannot read (tests/e2e/contract/test_schemathesis.py states it as a schema).
JSON_LIMITS = (
    "Any JSON that PostgreSQL's jsonb keeps exactly: text without NUL (\\u0000), integers within "
    f"{INT64.bit_length()} bits, finite numbers, nested at most {MAX_JSON_DEPTH} levels."
)
Json = Annotated[Any, AfterValidator(check_json)]
JsonArray = Annotated[list[Any], AfterValidator(check_json), Field(description=JSON_LIMITS)]
JsonObject = Annotated[dict[str, Any], AfterValidator(check_json), Field(description=JSON_LIMITS)]
# check_text's rule as a constraint, so the schema states what is validated: the pattern refuses
# NUL, and a string constraint refuses a lone surrogate (string_unicode).
Text = Annotated[str, StringConstraints(pattern=NO_NUL)]
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


# Every request body: strict, no unknown keys, optional fields nullable in the schema.
STRICT = ConfigDict(strict=True, extra="forbid", json_schema_extra=_declare_nulls)


def _strict_with_one_of(first: str, second: str) -> ConfigDict:
    """STRICT for a body that may give at most one of two keys (null counts as not given):
    the schema states it as "not both given and not null"."""

    def extra(schema: dict[str, Any], *_: Any) -> None:
        _declare_nulls(schema)
        given = {"not": {"type": "null"}}
        schema["not"] = {"required": [first, second], "properties": {first: given, second: given}}

    return ConfigDict(strict=True, extra="forbid", json_schema_extra=extra)


def _absent_means(default: Any, **constraints: Any) -> Any:
    """The Field of a key a job may leave out: the schema states the default that JobSpec then
    applies (tests/integration/test_push.py checks the two agree)."""
    return Field(json_schema_extra={"default": default}, **constraints)


_SECONDS = Field(gt=0, le=rules.SECONDS_MAX)
# A time a client sends. Not strict (the Field that uses it says strict=False): the body
# arrives as parsed JSON, where a time is an RFC 3339 string.
Time = Annotated[Annotated[AwareDatetime, AfterValidator(check_time)], BeforeValidator(_time_text)]


@with_config(_strict_with_one_of("key", "by"))
class UniqueBody(TypedDict):
    """A push's unique lock. ``for`` is a Python keyword: the field is ``for_``, sent as
    ``for``."""

    for_: NotRequired[
        Annotated[
            float,
            _SECONDS,
            Field(
                alias="for",
                description="Seconds the lock holds at most, from the job's `at` (or the "
                "push); absent: as long as the job holds it.",
            ),
        ]
    ]
    until: NotRequired[
        Annotated[
            rules.UniqueUntil,
            _absent_means(
                "success",
                strict=False,
                description="`success`: the lock holds until the job is acked (or dead, "
                "expired, cancelled); `start`: until a worker takes it.",
            ),
        ]
    ]
    key: NotRequired[
        Annotated[
            Text,
            Field(
                min_length=1,
                max_length=rules.UNIQUE_KEY_MAX_LENGTH,
                description="The lock's name; absent: a hash of jobtype, queue and args (or "
                "the `by` paths), in canonical JSON.",
            ),
        ]
    ]
    by: NotRequired[
        Annotated[
            list[
                Annotated[
                    str,
                    StringConstraints(
                        max_length=rules.UNIQUE_PATH_MAX_LENGTH, pattern=rules.UNIQUE_PATH_PATTERN
                    ),
                ]
            ],
            Field(
                min_length=1,
                max_length=rules.UNIQUE_BY_MAX_PATHS,
                description="Hash only these paths (`args.0`, `custom.tenant.id`) besides "
                "jobtype and queue; not with `key`.",
            ),
        ]
    ]
    on_conflict: NotRequired[
        Annotated[
            rules.OnConflict,
            _absent_means(
                "reject",
                strict=False,
                description="When another job holds the key: `reject` (409 `not_unique` naming "
                "it), `existing` (answer with it, `duplicate: true`), `replace` (a waiting "
                "holder takes this push's `args` and `at`; an active one keeps running and "
                "this job is stored).",
            ),
        ]
    ]


def _one_of(first: str, second: str) -> AfterValidator:
    """The rule that a body gives at most one of two keys."""

    def check(value: Any) -> Any:
        if first in value and second in value:
            raise ValueError(f"give either {first} or {second}, not both")
        return value

    return AfterValidator(check)


Unique = Annotated[
    UniqueBody,
    BeforeValidator(lambda data: without_nulls(data, ("for", "until", "key", "by", "on_conflict"))),
    _one_of("key", "by"),
]


# A job's name in its batch (depends_on names a job by ref or by jid).
Ref = Annotated[Text, StringConstraints(min_length=1, max_length=rules.REF_MAX_LENGTH)]


@with_config(STRICT)
class DependencyBody(TypedDict):
    """A dependency with its own policy."""

    job: Annotated[Ref, Field(description="A ref of this batch, or a stored job's jid.")]
    on_failure: NotRequired[
        Annotated[
            rules.DependencyPolicy,
            Field(
                strict=False,
                description="This edge's policy; absent: the job's `on_dependency_failure`.",
            ),
        ]
    ]


# A dependency as validated: null on_failure means not given.
Dependency = Annotated[
    DependencyBody, BeforeValidator(lambda data: without_nulls(data, ("on_failure",)))
]


# A dict, not a model: validating a batch then builds no model object per job. (That it gives
# at most one of expires_at and expires_in the schema states, and the push service checks, where
# it reads the job anyway: a validator here would cost every push.)
@with_config(_strict_with_one_of("expires_at", "expires_in"))
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
    at: NotRequired[
        Annotated[
            Time,
            _absent_means(
                None,
                strict=False,
                description="Run no earlier than this (RFC 3339 with a time zone); it "
                f"{OUT_OF_RANGE}.",
            ),
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
    keep_result_for: NotRequired[
        Annotated[
            int,
            _absent_means(
                0,
                ge=0,
                le=rules.KEEP_RESULT_FOR_MAX,
                description="Seconds the job stays readable as completed after its ack, with "
                "the result the ack carried (GET /v1/jobs/{jid}/result); 0: deleted at ack "
                "(unless the server's WERK_COMPLETED_RETENTION keeps every completed job).",
            ),
            INTEGRAL,
        ]
    ]
    unique: NotRequired[
        Annotated[Unique, Field(description="Store the job only if no other holds its key.")]
    ]
    expires_at: NotRequired[
        Annotated[
            Time,
            _absent_means(
                None,
                strict=False,
                description="Never run the job if it has not started by then (RFC 3339); it "
                f"becomes `expired`. Not with `expires_in`; it {OUT_OF_RANGE}.",
            ),
        ]
    ]
    expires_in: NotRequired[
        Annotated[
            float,
            _absent_means(
                None,
                gt=0,
                le=rules.SECONDS_MAX,
                description="As `expires_at`, in seconds from `at` (or the push).",
            ),
        ]
    ]
    ref: NotRequired[
        Annotated[
            Ref,
            _absent_means(
                None,
                description="The job's name in its batch, for `depends_on` of other items; "
                "the answer maps each ref to its jid.",
            ),
        ]
    ]
    depends_on: NotRequired[
        Annotated[
            list[Ref | Dependency],
            Field(
                min_length=1,
                max_length=rules.DEPENDS_ON_MAX,
                description="Jobs this one waits for (state `waiting`) until each is settled: "
                "refs of items of the same batch, or jids of stored jobs (a ref is looked up "
                "first). A dependency neither in the batch nor stored is refused (422 "
                "`dependency_not_found`); one completed and still stored counts as completed, "
                "with its result. The job receives its completed dependencies' results "
                "(`dependencies` of the fetched job).",
            ),
        ]
    ]
    batch: NotRequired[
        Annotated[
            Jid,
            _absent_means(
                None,
                description="The bid of an open batch the job joins (`POST /v1/batches`); "
                "a batch not found is refused (404 `batch_not_found`), a committed one too "
                "(409 `batch_committed`).",
            ),
        ]
    ]
    on_dependency_failure: NotRequired[
        Annotated[
            rules.DependencyPolicy,
            _absent_means(
                "fail",
                strict=False,
                description="When a dependency ends dead, expired, cancelled, skipped or "
                "deleted: `fail` (this job goes dead naming the cause; skipped when the "
                "dependency was skipped), `skip` (this job is skipped, never run), `ignore` "
                "(it runs anyway).",
            ),
        ]
    ]


JOB_KEYS = frozenset(JobPush.__annotations__)
# (``__optional_keys__`` misses NotRequired in the postponed annotations of this module.)
_JOB_OPTIONAL = JOB_KEYS - set(TypeAdapter(JobPush).json_schema()["required"])


# The pushed job as adapters take it: JobPush with its null optional keys dropped (a
# TypedDict has no validators of its own).
JobPushBody = Annotated[JobPush, BeforeValidator(lambda data: without_nulls(data, _JOB_OPTIONAL))]


# A batch's callback job: a push's fields but those that would make it wait for something else
# than its batch (a time, a key, dependencies, another batch, an expiry, a ref).
CALLBACK_KEYS = (
    "jid", "jobtype", "args", "queue", "priority", "reserve_for", "retry", "backtrace", "custom",
    "keep_result_for",
)  # fmt: skip
if TYPE_CHECKING:  # a TypedDict built at run time: the checker reads it as the push it narrows
    CallbackJobBody = JobPushBody
else:
    _JOB_HINTS = get_type_hints(JobPush, include_extras=True)
    CallbackJob = with_config(STRICT)(
        TypedDict("CallbackJob", {k: _JOB_HINTS[k] for k in CALLBACK_KEYS}, total=True)
    )
    _CALLBACK_OPTIONAL = frozenset(CALLBACK_KEYS) & _JOB_OPTIONAL
    # The callback as adapters take it: null optional keys dropped, as for a push.
    CallbackJobBody = Annotated[
        CallbackJob, BeforeValidator(lambda data: without_nulls(data, _CALLBACK_OPTIONAL))
    ]


# The request bodies as msgspec decodes them (werk.api.traffic builds one decoder per body).
# Their rules, which JSON Schema states the same way (msgspec.json.schema):
# - strict types, no unknown keys (forbid_unknown_fields);
# - null on an optional field means "not given": the field is declared ``T | None`` with its
#   default, and the body's __post_init__ puts the default back (with_defaults);
# - an integer may come as a number without fraction (JSON Schema counts 31.0 as an integer):
#   integer() takes both, the body's __post_init__ makes it an int (integral), and the schema
#   says integer (werk.api.traffic's document);
# - a check msgspec cannot state (check_json, a rule between fields) runs in __post_init__ and
#   raises InvalidField, which names the field in the error's location.


T = TypeVar("T")
if TYPE_CHECKING:  # once the body's __post_init__ ran (with_defaults), never None
    Nullable: TypeAlias = Annotated[T, "null means not given"]
else:
    Nullable = Optional[T]  # noqa: UP045 (a generic alias: Nullable[int] is int | None)


class Body(msgspec.Struct, forbid_unknown_fields=True):
    """A request body: strict, no unknown keys."""


class InvalidField(ValueError):
    """A body's field is invalid: msgspec reports the body's location, the message names the
    field (read back by located())."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{_FIELD_MARK}{field}: {message}")


_FIELD_MARK = "field "
_UNKNOWN = "Object contains unknown field `"
_MISSING = "Object missing required field `"


def located(error: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's error as (location, message): ``$.jobs[0].queue`` is ``jobs.0.queue``, the
    body itself ``body``; a missing, unknown or InvalidField key is named in the location."""
    text = str(error)
    message, at, path = text.rpartition(" - at `")
    if not at:
        message, path = text, "$`"
    parts = [p for p in path[1:-1].replace("[", ".").replace("]", "").split(".") if p]
    for mark in (_UNKNOWN, _MISSING):
        if message.startswith(mark):
            name = message[len(mark) :].partition("`")[0]
            parts.append(name)
            message = "Extra inputs are not permitted" if mark == _UNKNOWN else "Field required"
    if message.startswith(_FIELD_MARK):
        name, _, message = message[len(_FIELD_MARK) :].partition(": ")
        parts.append(name)
    return ".".join(parts) or "body", message


def integral(value: int | float, field: str) -> int:
    """``value`` of an integer() field as an int."""
    if type(value) is float:
        if not value.is_integer():
            raise InvalidField(field, "Input should be a valid integer")
        return int(value)
    return value  # type: ignore[return-value]


def integer(ge: int, le: int) -> Any:
    """The type of an integer field in [ge, le] (see integral)."""
    return Annotated[int, msgspec.Meta(ge=ge, le=le)] | Annotated[float, msgspec.Meta(ge=ge, le=le)]


def with_defaults(body: msgspec.Struct, names: Iterable[str]) -> None:
    """Null on the optional fields ``names`` means "not given": their defaults apply."""
    cls = type(body)
    for name in names:
        if getattr(body, name) is None:
            setattr(body, name, _default_of(cls, name))


def _default_of(cls: type[msgspec.Struct], name: str) -> Any:
    fields = cls.__struct_fields__
    defaults = cls.__struct_defaults__
    default = defaults[fields.index(name) - (len(fields) - len(defaults))]
    return default.factory() if isinstance(default, _FACTORY) else default


_FACTORY = type(
    msgspec.defstruct(
        "_Probe", [("x", list, msgspec.field(default_factory=list))]
    ).__struct_defaults__[0]
)


def checked_json(value: Any, field: str) -> Any:
    """check_json's rule on a body's field."""
    try:
        return check_json(value)
    except ValueError as exc:
        raise InvalidField(field, str(exc)) from None


# Text that check_text allows: msgspec refuses lone surrogates itself; NUL, which a pattern
# would find at a regular expression's cost per string, the body's __post_init__ refuses
# (no_nul), and the schema states it as the pattern.
MText = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": NO_NUL})]


def no_nul(body: msgspec.Struct, names: Iterable[str]) -> None:
    """check_text's NUL rule on the MText fields ``names`` (a text, a list of texts or None)."""
    for name in names:
        value = getattr(body, name)
        if value and "\x00" in (value if type(value) is str else "".join(value)):
            raise InvalidField(name, "must not contain NUL (\\u0000) characters")


def exact(pattern: str) -> str:
    """``pattern`` (``^...$``) as msgspec must be given it: it searches with Python's re, whose
    "$" also matches before a final newline; ECMA's (JSON Schema's) does not, and the lookahead
    means the same to both."""
    return pattern + r"(?!\n)"


MQueueName = Annotated[str, msgspec.Meta(pattern=exact(rules.QUEUE_PATTERN))]
