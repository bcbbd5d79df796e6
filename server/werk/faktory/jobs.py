"""Faktory's job JSON <-> Werk's jobs. A pushed job is validated by the model every adapter
shares (``domain.bodies.JobPush``), after Faktory's own rules where its clients rely on them:
``jid`` and ``args`` are required, unknown keys are accepted and dropped, an empty ``queue`` or
``at`` is not given, ``reserve_for`` 0 is the default and below 60 is raised to 60, ``priority``
is Faktory's 1..9 and ``retry`` and ``backtrace`` are cut to Werk's bounds. Faktory
Enterprise's options ride in ``custom``: ``unique_for`` (seconds; the job is unique by jobtype,
queue and args, and a push that meets a holder is refused) with ``unique_until`` (``success``
or ``start``), and ``expires_at`` or ``expires_in``. ``keep_result_for``
may also come in ``custom``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from werk.domain import job as rules
from werk.domain.bodies import JobPush, located
from werk.domain.jids import new_jid
from werk.domain.json_values import check_text

# Faktory's priorities run 1..9 with 5 the default; Werk's default is 0. Faktory's 5 is Werk's 0,
# so FWP and HTTP jobs of default priority share one FIFO order.
PRIORITY_OFFSET = 5
ERRTYPE_MAX = 100
MESSAGE_MAX = 1000
BACKTRACE_MAX = 50

_JOB_KEYS = frozenset(f.encode_name for f in msgspec.structs.fields(JobPush))
# What the model's patterns allow, in words (its own message quotes the regular expression).
_PATTERN_HINTS = {
    "jid": "use A-Z a-z 0-9, after the first also . _ ~ : @ + = -",
    "queue": f"use {rules.QUEUE_NAMES}",
}


class InvalidJob(ValueError):
    """The job cannot be pushed; the message says why (it becomes ``-ERR <message>``)."""


def job_spec(raw: Any) -> JobPush:
    """Validate one pushed job. Raises InvalidJob with a one-line reason."""
    if not isinstance(raw, dict):
        raise InvalidJob("a job must be a JSON object")
    if raw.get("jid") is None:
        raise InvalidJob(f"jobs must have a jid of at least {rules.JID_MIN_LENGTH} characters")
    if raw.get("args") is None:
        raise InvalidJob("jobs must have an args array (it may be empty)")
    body: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _JOB_KEYS and key not in _WERK_ONLY:
            faktory = _FAKTORY_RULES.get(key)
            body[key] = value if faktory is None else faktory(value)
    custom = raw.get("custom")
    if isinstance(custom, dict):
        body.update(_enterprise_options(custom))
        # An option of the server's own, set in custom as Faktory clients set Enterprise's:
        # it applies unless the job names keep_result_for itself.
        if "keep_result_for" not in body and "keep_result_for" in custom:
            body["keep_result_for"] = custom["keep_result_for"]
    try:
        return msgspec.convert(body, JobPush)
    except msgspec.ValidationError as exc:
        raise InvalidJob(_reason(body, exc)) from None
    except UnicodeEncodeError:
        # msgspec reads a time or a choice from the text's UTF-8, which a lone surrogate has
        # none of; the fields the model checks as text answer a ValidationError instead.
        raise InvalidJob(_unencodable(body)) from None


# Werk's own keys, which Faktory's jobs carry in custom instead.
_WERK_ONLY = frozenset(
    {"unique", "expires_at", "expires_in", "ref", "depends_on", "on_dependency_failure", "batch"}
)


def _enterprise_options(custom: dict[str, Any]) -> dict[str, Any]:
    """Faktory Enterprise's unique, expiry and batch options in ``custom``, as JobPush's fields (the
    model then checks them, and names them if they are wrong)."""
    options: dict[str, Any] = {}
    if custom.get("unique_for") is not None:
        unique: dict[str, Any] = {"for": custom["unique_for"], "on_conflict": "reject"}
        if custom.get("unique_until") is not None:
            unique["until"] = custom["unique_until"]
        options["unique"] = unique
    for key in ("expires_at", "expires_in"):
        if custom.get(key) is not None:
            options[key] = custom[key]
    # Enterprise's batches: a job joins the batch its custom.bid names (and keeps it there, for
    # the job to open its batch again from inside).
    if custom.get("bid") is not None:
        options["batch"] = custom["bid"]
    return options


def _integer(value: Any) -> int | None:
    """``value`` as an integer when it is a number without a fraction, else None."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value if type(value) is int else None


def _cut(low: int, high: int, shift: int = 0) -> Callable[[Any], Any]:
    """The rule of a field whose integer (plus ``shift``) Faktory moves into [low, high]; any
    other value is left for the model to refuse."""

    def rule(value: Any) -> Any:
        number = _integer(value)
        return value if number is None else min(max(number + shift, low), high)

    return rule


def _reserve_for(value: Any) -> Any:
    """0 is the default; below the minimum is raised to it (above the maximum is refused)."""
    number = _integer(value)
    if number is None:
        return value
    return None if number == 0 else max(number, rules.RESERVE_FOR_MIN)


# Faktory's reading of a field before the model checks it; None is "not given" (the model's
# default applies).
_FAKTORY_RULES: dict[str, Callable[[Any], Any]] = {
    "queue": lambda value: None if value == "" else value,
    "at": lambda value: None if value == "" else value,
    "priority": _cut(rules.PRIORITY_MIN, rules.PRIORITY_MAX, -PRIORITY_OFFSET),
    "reserve_for": _reserve_for,
    "retry": _cut(rules.RETRY_MIN, rules.RETRY_MAX),
    "backtrace": _cut(0, rules.BACKTRACE_MAX_LINES),
}


def _reason(body: dict[str, Any], exc: msgspec.ValidationError) -> str:
    """The error as one line naming the field."""
    loc, message = located(exc)
    field = "job" if loc == "body" else loc
    if message == "Field required":
        return f"jobs must have a {field}"
    if field.partition(".")[0] in ("args", "custom"):
        return f"{field}: {message}"
    if message.startswith("Expected `str` matching regex"):
        message = _PATTERN_HINTS.get(field, message)
    shown = repr(_value_at(body, loc))
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"invalid {field} {shown}: {message}"


def _unencodable(body: dict[str, Any]) -> str:
    """The reason naming the first field (or field of an object, as ``unique.until``) whose
    text UTF-8 cannot encode. args and custom are left to the model, which checks them as
    JSON."""
    for field, value in body.items():
        if field in ("args", "custom"):
            continue
        inner = value.items() if isinstance(value, dict) else [(None, value)]
        for key, text in inner:
            if isinstance(text, str):
                try:
                    check_text(text)
                except ValueError as exc:
                    return f"invalid {field if key is None else f'{field}.{key}'}: {exc}"
    return "invalid job: texts must not contain lone surrogates (\\ud800-\\udfff)"


def _value_at(body: Any, loc: str) -> Any:
    """What the job holds at ``loc`` (``unique.for``, ``depends_on.0``)."""
    value = body
    for part in loc.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
    return value


def faktory_job(row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored job as Faktory clients expect it."""
    job: dict[str, Any] = {
        "jid": row["jid"],
        "jobtype": row["jobtype"],
        "args": row["args"],
        "queue": row["queue"],
        "priority": row["priority"] + PRIORITY_OFFSET,
        "reserve_for": row["reserve_for"],
        "retry": row["retry"],
        "backtrace": row["backtrace"],
        "created_at": row["created_at"],
        "enqueued_at": row["enqueued_at"],
    }
    if row["custom"]:
        job["custom"] = row["custom"]
    if row["at"] is not None:
        job["at"] = row["at"]
    if row["failed_at"] is not None:
        job["failure"] = {
            "retry_count": row["retry_count"],
            "remaining": rules.retries_remaining(row["state"], row["retry"], row["retry_count"]),
            "failed_at": row["failed_at"],
            "next_at": row["run_at"] if row["state"] == "scheduled" else None,
            "message": row["message"],
            "errtype": row["errtype"],
            "backtrace": row["error_backtrace"] or [],
        }
    return job


def callback_spec(raw: Any) -> JobPush:
    """A batch's callback job as BATCH NEW carries it: a job whose jid and args may be left out
    (a jid is generated); it never joins a batch itself."""
    if not isinstance(raw, dict):
        raise InvalidJob("a batch callback must be a JSON object")
    job = {"jid": new_jid(), "args": [], **raw}
    if isinstance(job.get("custom"), dict):
        job["custom"] = {k: v for k, v in job["custom"].items() if k != "bid"}
    return job_spec(job)


# A callback's state as Faktory's BATCH STATUS reports it: "" not fired, "1" fired (pending or
# running), "2" succeeded; a fired callback no longer stored has been pruned after its ack.
_CALLBACK_STATES = {"waiting": "", "skipped": "", "completed": "2"}


def faktory_batch(row: Mapping[str, Any]) -> dict[str, Any]:
    """A batch as Faktory's BATCH STATUS answers it."""

    def state(kind: str, fired: Any) -> str:
        if row[f"{kind}_jid"] is None:
            return "" if fired is None else "2"
        current = row[f"{kind}_state"]
        if current is None:
            return "2"
        return _CALLBACK_STATES.get(current, "1")

    return {
        "bid": row["bid"],
        "parent_bid": row["parent"] or "",
        "description": row["description"] or "",
        "created_at": row["created_at"],
        "total": row["total"],
        "pending": row["pending"],
        "failed": row["dead"],
        "complete_st": state("complete", row["completed_at"]),
        "success_st": state("success", row["succeeded_at"]),
    }
