"""The request bodies every adapter shares, as msgspec decodes them: the pushed job (validated
by the HTTP routes and stated in their OpenAPI document, and by FWP's PUSH and PUSHB) and the
field types and helpers the other request bodies are built with."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Optional, TypeAlias, TypeVar

import msgspec
import orjson

from werk.domain import job as rules
from werk.domain.json_values import (
    INT64,
    MAX_JSON_DEPTH,
    MAX_WRITTEN_ZEROS,
    NO_NUL,
    check_json,
    check_text,
    walk,
)
from werk.domain.times import OUT_OF_RANGE, check_time

# What check_json accepts, in words: JSON Schema could say it only recursively, which several
# client generators cannot read (tests/e2e/contract/test_schemathesis.py states it as a schema).
JSON_LIMITS = (
    "Any JSON that PostgreSQL's jsonb keeps exactly: text without NUL (\\u0000), finite numbers "
    f"within the range of {INT64.bit_length()}-bit integers, nested at most {MAX_JSON_DEPTH} "
    f"levels; numbers below 1e-4, which PostgreSQL writes out in full, add at most "
    f"{MAX_WRITTEN_ZEROS} zeros."
)


# The request bodies as msgspec decodes them (werk.api.traffic builds one decoder per body).
# Their rules, which JSON Schema states the same way (msgspec.json.schema):
# - strict types, no unknown keys (forbid_unknown_fields);
# - null on an optional field means "not given": the field is declared ``T | None`` with its
#   default, and the body's __post_init__ puts the default back (with_defaults);
# - an integer may come as a number without fraction (JSON Schema counts 31.0 as an integer):
#   integer() takes both, the body's __post_init__ makes it an int (integral), and the schema
#   says integer (werk.api.traffic's document);
# - a check msgspec cannot state runs in __post_init__: a field's (check_json) raises
#   InvalidField, which names the field in the error's location; a rule between fields raises
#   ValueError (located at the body) and the body's schema_extra states it (werk.api.traffic's
#   document).


T = TypeVar("T")
if TYPE_CHECKING:  # once the body's __post_init__ ran (with_defaults), never None
    Nullable: TypeAlias = Annotated[T, "null means not given"]
else:
    Nullable = Optional[T]  # noqa: UP045 (a generic alias: Nullable[int] is int | None)


class Body(msgspec.Struct, forbid_unknown_fields=True):
    """A request body: strict, no unknown keys."""

    # What its schema states besides msgspec's (a rule between fields).
    schema_extra: ClassVar[dict[str, Any]] = {}


class InvalidField(ValueError):
    """A body's field is invalid: msgspec reports the body's location, the message names the
    field (read back by located())."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{_FIELD_MARK}{field}: {message}")


_FIELD_MARK = "field "
_UNKNOWN = "Object contains unknown field `"
_MISSING = "Object missing required field `"
_PATTERN = "Expected `str` matching regex "


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
    if message.startswith(_PATTERN):
        # msgspec quotes the pattern as repr() does, its backslashes doubled; the message quotes
        # it as the schema states it.
        message = message.replace("\\\\", "\\").replace(EXACT, "")
    return ".".join(parts) or "body", message


# A body's errors listed at most: each after the first costs validating the body again.
MAX_ERRORS = 10


def every_error(
    body_type: type[msgspec.Struct], data: Any, first: msgspec.ValidationError
) -> list[tuple[str, str]]:
    """The located() errors of ``data`` (parsed JSON) as ``body_type``, ``first`` (the error
    msgspec stops at) first: each field found invalid is left out and the rest validated
    again, until none is found or the field cannot be left out (an item, a missing field; a
    required field left out is missing, which its object's other fields are checked before)."""
    errors: list[tuple[str, str]] = []
    error: msgspec.ValidationError | None = first
    while error is not None and len(errors) < MAX_ERRORS:
        loc, message = located(error)
        if any(loc == seen for seen, _ in errors):
            break
        errors.append((loc, message))
        if not _left_out(data, loc):
            break
        try:
            msgspec.convert(data, body_type)
            error = None
        except msgspec.ValidationError as exc:
            error = exc
    return errors


def _left_out(data: Any, loc: str) -> bool:
    """Removes the key at ``loc`` (``jobs.1.queue``) from ``data``: whether it was there."""
    *path, name = loc.split(".")
    node = walk(data, path)
    if type(node) is dict and loc != "body" and name in node:
        del node[name]
        return True
    return False


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


# Text that check_text allows: msgspec refuses lone surrogates in JSON itself, but not in a
# body converted from parsed objects (FWP's); NUL, which a pattern would find at a regular
# expression's cost per string, the body's __post_init__ refuses (texts), and the schema states
# it as the pattern.
MText = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": NO_NUL})]


def texts(body: msgspec.Struct, names: Iterable[str]) -> None:
    """check_text's rule on the MText fields ``names`` (a text, a list of texts or None)."""
    for name in names:
        value = getattr(body, name)
        if value:
            checked_text(value if type(value) is str else "".join(value), name)


def checked_text(text: str, field: str) -> None:
    """check_text's rule on (the texts of) a body's field."""
    if "\x00" in text or not text.isascii():
        try:
            check_text(text)
        except ValueError as exc:
            raise InvalidField(field, str(exc)) from None


def exact(pattern: str) -> str:
    """``pattern`` (``^...$``) as msgspec must be given it: it searches with Python's re, whose
    "$" also matches before a final newline; ECMA's (JSON Schema's) does not. The document
    states the pattern without the lookahead (EXACT)."""
    return pattern + EXACT


EXACT = r"(?!\n)"


MQueueName = Annotated[str, msgspec.Meta(pattern=exact(rules.QUEUE_PATTERN))]


def one_of(first: str, second: str) -> dict[str, Any]:
    """The schema of a body that gives at most one of two keys (null counts as not given): "not
    both given and not null" (see schema_extra)."""
    given = {"not": {"type": "null"}}
    return {"not": {"required": [first, second], "properties": {first: given, second: given}}}


def checked_time(value: datetime, field: str) -> datetime:
    """check_time's rule on a body's field: the time in UTC."""
    try:
        return check_time(value)
    except ValueError as exc:
        raise InvalidField(field, str(exc)) from None


def integrals(body: msgspec.Struct, names: Iterable[str]) -> None:
    """integral() on the integer() fields ``names`` that came as numbers."""
    for name in names:
        value = getattr(body, name)
        if type(value) is float:
            setattr(body, name, integral(value, name))


if TYPE_CHECKING:  # integer(): an int once the body's __post_init__ ran
    Priority: TypeAlias = int
    ReserveFor: TypeAlias = int
    Retry: TypeAlias = int
    Backtrace: TypeAlias = int
    KeepResultFor: TypeAlias = int
else:
    Priority = integer(rules.PRIORITY_MIN, rules.PRIORITY_MAX)
    ReserveFor = integer(rules.RESERVE_FOR_MIN, rules.RESERVE_FOR_MAX)
    Retry = integer(rules.RETRY_MIN, rules.RETRY_MAX)
    Backtrace = integer(0, rules.BACKTRACE_MAX_LINES)
    KeepResultFor = integer(0, rules.KEEP_RESULT_FOR_MAX)
# Any array, any object: msgspec states them without items or additionalProperties, which some
# generators cannot read (or read as an object without keys).
JsonArray = Annotated[list[Any], msgspec.Meta(extra_json_schema={"items": {}})]
JsonObject = Annotated[
    dict[str, Any], msgspec.Meta(extra_json_schema={"additionalProperties": True})
]
# A time a client sends: RFC 3339 with a time zone.
Time = Annotated[datetime, msgspec.Meta(tz=True)]
Seconds = Annotated[float, msgspec.Meta(gt=0, le=rules.SECONDS_MAX)]
# The jid of a job to store.
Jid = Annotated[
    str,
    msgspec.Meta(
        min_length=rules.JID_MIN_LENGTH,
        max_length=rules.JID_MAX_LENGTH,
        pattern=exact(rules.JID_PATTERN),
    ),
]
# A job's name in its batch (depends_on names a job by ref or by jid).
Ref = Annotated[MText, msgspec.Meta(min_length=1, max_length=rules.REF_MAX_LENGTH)]
UniquePath = Annotated[
    str,
    msgspec.Meta(max_length=rules.UNIQUE_PATH_MAX_LENGTH, pattern=exact(rules.UNIQUE_PATH_PATTERN)),
]


def _about(description: str) -> msgspec.Meta:
    return msgspec.Meta(description=description)


class UniqueBody(Body):
    """A push's unique lock. ``for`` is a Python keyword: the field is ``for_``, sent as
    ``for``."""

    schema_extra: ClassVar[dict[str, Any]] = one_of("key", "by")

    for_: Annotated[
        Seconds | None,
        _about(
            "Seconds the lock holds at most, from the job's `at` (or the push); absent: as long as "
            "the job holds it."
        ),
    ] = msgspec.field(default=None, name="for")
    until: Annotated[
        Nullable[rules.UniqueUntil],
        _about(
            "`success`: the lock holds until the job is acked (or dead, expired, cancelled); "
            "`start`: until a worker takes it."
        ),
    ] = rules.UniqueUntil.SUCCESS
    key: Annotated[
        Annotated[MText, msgspec.Meta(min_length=1, max_length=rules.UNIQUE_KEY_MAX_LENGTH)] | None,
        _about(
            "The lock's name; absent: a hash of jobtype, queue and args (or the `by` paths), in "
            "canonical JSON."
        ),
    ] = None
    by: Annotated[
        Annotated[
            list[UniquePath], msgspec.Meta(min_length=1, max_length=rules.UNIQUE_BY_MAX_PATHS)
        ]
        | None,
        _about(
            "Hash only these paths (`args.0`, `custom.tenant.id`) besides jobtype and queue; not "
            "with `key`."
        ),
    ] = None
    on_conflict: Annotated[
        Nullable[rules.OnConflict],
        _about(
            "When another job holds the key: `reject` (409 `not_unique` naming it), `existing` "
            "(answer with it, `duplicate: true`), `replace` (a waiting holder takes this push's "
            "`args` and `at`; an active one keeps running and this job is stored)."
        ),
    ] = rules.OnConflict.REJECT

    def __post_init__(self) -> None:
        if self.until is None or self.on_conflict is None:
            with_defaults(self, ("until", "on_conflict"))
        texts(self, ("key",))
        if self.key is not None and self.by is not None:
            raise ValueError("give either key or by, not both")


class DependencyBody(Body):
    """A dependency with its own policy."""

    job: Annotated[Ref, _about("A ref of this batch, or a stored job's jid.")]
    on_failure: Annotated[
        rules.DependencyPolicy | None,
        _about("This edge's policy; absent: the job's `on_dependency_failure`."),
    ] = None

    def __post_init__(self) -> None:
        texts(self, ("job",))


# The optional fields whose default is not None (null puts it back), and the integer() fields.
_CALLBACK_DEFAULTS = (
    "args", "queue", "priority", "reserve_for", "retry", "backtrace", "custom", "keep_result_for",
)  # fmt: skip
_INTEGERS = ("priority", "reserve_for", "retry", "backtrace", "keep_result_for")


class CallbackJob(Body, kw_only=True):
    """A batch's callback job: a push's fields but those that would make it wait for something
    else than its batch (a time, a key, dependencies, another batch, an expiry, a ref)."""

    jid: Annotated[
        Jid | None,
        _about(
            "Unique id; generated when absent. Re-pushing an existing jid stores nothing new and "
            "returns the stored job."
        ),
    ] = None
    jobtype: Annotated[MText, msgspec.Meta(min_length=1, max_length=rules.JOBTYPE_MAX_LENGTH)]
    args: Annotated[Nullable[JsonArray], _about(JSON_LIMITS)] = msgspec.field(default_factory=list)
    queue: Nullable[MQueueName] = "default"
    priority: Annotated[Nullable[Priority], _about("Higher runs first within a queue.")] = 0
    reserve_for: Annotated[
        Nullable[ReserveFor], _about("Seconds a fetched job stays leased before it expires.")
    ] = rules.RESERVE_FOR_DEFAULT
    retry: Annotated[
        Nullable[Retry],
        _about("Retries before dead; 0 discards on failure, -1 is dead on the first failure."),
    ] = rules.RETRY_DEFAULT
    backtrace: Annotated[
        Nullable[Backtrace],
        _about(
            "Lines of a failure's backtrace to keep: Werk's workers send at most this many "
            "(0: the worker's own limit)."
        ),
    ] = 0
    custom: Annotated[Nullable[JsonObject], _about(JSON_LIMITS)] = msgspec.field(
        default_factory=dict
    )
    keep_result_for: Annotated[
        Nullable[KeepResultFor],
        _about(
            "Seconds the job stays readable as completed after its ack, with the result the ack "
            "carried (GET /v1/jobs/{jid}/result); 0: deleted at ack (unless the server's "
            "WERK_COMPLETED_RETENTION keeps every completed job)."
        ),
    ] = 0

    # Written out field by field: it runs for every job of every push.
    def __post_init__(self) -> None:
        if (
            self.args is None
            or self.queue is None
            or self.priority is None
            or self.reserve_for is None
            or self.retry is None
            or self.backtrace is None
            or self.custom is None
            or self.keep_result_for is None
        ):
            with_defaults(self, _CALLBACK_DEFAULTS)
        if "\x00" in self.jobtype or not self.jobtype.isascii():
            checked_text(self.jobtype, "jobtype")
        if (
            type(self.priority) is float
            or type(self.reserve_for) is float
            or type(self.retry) is float
            or type(self.backtrace) is float
            or type(self.keep_result_for) is float
        ):
            integrals(self, _INTEGERS)
        if self.args:
            checked_json(self.args, "args")
        if self.custom:
            checked_json(self.custom, "custom")

    def new_job(self, jid: str) -> rules.NewJob:
        """The job as it is written: its jid decided, its JSON encoded."""
        return self._written(jid, None, None, None, None)

    def _written(
        self,
        jid: str,
        at: datetime | None,
        expires_at: datetime | None,
        expires_in: float | None,
        batch: str | None,
    ) -> rules.NewJob:
        # Positional: it runs for every job of every push.
        return rules.NewJob(
            jid, self.jobtype, self.queue, orjson.dumps(self.args).decode(), self.priority,
            self.reserve_for, self.retry, self.backtrace, orjson.dumps(self.custom).decode(), at,
            self.keep_result_for or None, expires_at, expires_in, None, batch, self.jid is None,
        )  # fmt: skip


# As every adapter decodes a pushed job and the push service takes it.
class JobPush(CallbackJob, kw_only=True):
    """A job to push. Only ``jobtype`` is required."""

    schema_extra: ClassVar[dict[str, Any]] = one_of("expires_at", "expires_in")

    at: Annotated[
        Time | None,
        _about(f"Run no earlier than this (RFC 3339 with a time zone); it {OUT_OF_RANGE}."),
    ] = None
    unique: Annotated[
        UniqueBody | None, _about("Store the job only if no other holds its key.")
    ] = None
    expires_at: Annotated[
        Time | None,
        _about(
            "Never run the job if it has not started by then (RFC 3339); it becomes `expired`. Not "
            f"with `expires_in`; it {OUT_OF_RANGE}."
        ),
    ] = None
    expires_in: Annotated[
        Seconds | None, _about("As `expires_at`, in seconds from `at` (or the push).")
    ] = None
    ref: Annotated[
        Ref | None,
        _about(
            "The job's name in its batch, for `depends_on` of other items; the answer maps each "
            "ref to its jid."
        ),
    ] = None
    depends_on: Annotated[
        Annotated[
            list[Ref | DependencyBody],
            msgspec.Meta(min_length=1, max_length=rules.DEPENDS_ON_MAX),
        ]
        | None,
        _about(
            "Jobs this one waits for (state `waiting`) until each is settled: refs of items of the"
            " same batch, or jids of stored jobs (a ref is looked up first). A dependency neither "
            "in the batch nor stored is refused (422 `dependency_not_found`); one completed and "
            "still stored counts as completed, with its result. The job receives its completed "
            "dependencies' results (`dependencies` of the fetched job)."
        ),
    ] = None
    batch: Annotated[
        Jid | None,
        _about(
            "The bid of an open batch the job joins (`POST /v1/batches`); a batch not found is "
            "refused (404 `batch_not_found`), a committed one too (409 `batch_committed`)."
        ),
    ] = None
    on_dependency_failure: Annotated[
        Nullable[rules.DependencyPolicy],
        _about(
            "When a dependency ends dead, expired, cancelled, skipped or deleted: `fail` (this job"
            " goes dead naming the cause; skipped when the dependency was skipped), `skip` (this "
            "job is skipped, never run), `ignore` (it runs anyway)."
        ),
    ] = rules.DependencyPolicy.FAIL

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.on_dependency_failure is None:
            self.on_dependency_failure = rules.DependencyPolicy.FAIL
        if self.at is not None:
            self.at = checked_time(self.at, "at")
        if self.expires_at is not None:
            if self.expires_in is not None:
                raise InvalidField("expires_in", "not with expires_at")
            self.expires_at = checked_time(self.expires_at, "expires_at")
        if self.ref is not None:
            texts(self, ("ref",))
        if self.depends_on is not None:
            checked_text("".join(i for i in self.depends_on if type(i) is str), "depends_on")

    def new_job(self, jid: str) -> rules.NewJob:
        """The job as it is written, but its unique lock (werk.domain.unique decides it)."""
        return self._written(jid, self.at, self.expires_at, self.expires_in, self.batch)
