"""Faktory's job JSON <-> Werk's jobs. Validation follows Faktory where clients rely on it
(``reserve_for`` below 60 is raised to 60, ``retry`` absent means 25, unknown keys are accepted)
and Werk's limits elsewhere (the schema's CHECKs)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from werk.domain import job as rules
from werk.domain.job import JobSpec
from werk.domain.times import OUT_OF_RANGE, check_time

# Faktory's priorities run 1..9 with 5 the default; Werk's default is 0. Faktory's 5 is Werk's 0,
# so FWP and HTTP jobs of default priority share one FIFO order.
PRIORITY_OFFSET = 5
MAX_JSON_DEPTH = 64
INT64 = 2**63
ERRTYPE_MAX = 100
MESSAGE_MAX = 1000
BACKTRACE_MAX = 50

_QUEUE = re.compile(rules.QUEUE_PATTERN)
_JID = re.compile(rules.JID_PATTERN)


class InvalidJob(ValueError):
    """The job cannot be pushed; the message says why (it becomes ``-ERR <message>``)."""


def job_spec(raw: Any) -> JobSpec:
    """Validate one pushed job. Raises InvalidJob with a one-line reason."""
    if not isinstance(raw, dict):
        raise InvalidJob("a job must be a JSON object")
    jid = raw.get("jid")
    if not isinstance(jid, str) or len(jid) < rules.JID_MIN_LENGTH:
        raise InvalidJob(f"jobs must have a jid of at least {rules.JID_MIN_LENGTH} characters")
    if len(jid) > rules.JID_MAX_LENGTH:
        raise InvalidJob(f"jid is longer than {rules.JID_MAX_LENGTH} characters")
    if not _JID.fullmatch(jid):
        raise InvalidJob(
            f"invalid jid {jid!r}: use A-Z a-z 0-9, after the first also . _ ~ : @ + = -"
        )
    jobtype = raw.get("jobtype")
    if not isinstance(jobtype, str) or not jobtype:
        raise InvalidJob("jobs must have a jobtype")
    if len(jobtype) > rules.JOBTYPE_MAX_LENGTH:
        raise InvalidJob(f"jobtype is longer than {rules.JOBTYPE_MAX_LENGTH} characters")
    args = raw.get("args")
    if not isinstance(args, list):
        raise InvalidJob("jobs must have an args array (it may be empty)")
    queue = raw.get("queue") or "default"
    if not isinstance(queue, str) or not _QUEUE.fullmatch(queue):
        raise InvalidJob("invalid queue name: use 1-100 characters from A-Z a-z 0-9 . _ -")
    custom = raw.get("custom")
    if custom is None:
        custom = {}
    if not isinstance(custom, dict):
        raise InvalidJob("custom must be a JSON object")
    for name, value in (("jid", jid), ("jobtype", jobtype), ("args", args), ("custom", custom)):
        problem = _json_problem(value)
        if problem:
            raise InvalidJob(f"{name}: {problem}")
    return JobSpec(
        jid=jid,
        jobtype=jobtype,
        args=args,
        queue=queue,
        priority=_priority(raw.get("priority")),
        reserve_for=_reserve_for(raw.get("reserve_for")),
        retry=_retry(raw.get("retry")),
        backtrace=_int_field(raw.get("backtrace"), "backtrace", 0, 0, rules.BACKTRACE_MAX_LINES),
        custom=custom,
        at=_at(raw.get("at")),
    )


def _int_value(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidJob(f"{name} must be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise InvalidJob(f"{name} must be an integer")
        return int(value)
    number: int = value
    return number


def _int_field(value: Any, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    return min(max(_int_value(value, name), low), high)


def _priority(value: Any) -> int:
    if value is None:
        return 0
    werk = _int_value(value, "priority") - PRIORITY_OFFSET
    return min(max(werk, rules.PRIORITY_MIN), rules.PRIORITY_MAX)


def _reserve_for(value: Any) -> int:
    if value is None:
        return rules.RESERVE_FOR_DEFAULT
    seconds = _int_value(value, "reserve_for")
    if seconds == 0:
        return rules.RESERVE_FOR_DEFAULT
    if seconds > rules.RESERVE_FOR_MAX:
        raise InvalidJob(f"reserve_for must be at most {rules.RESERVE_FOR_MAX} seconds")
    return max(seconds, rules.RESERVE_FOR_MIN)


def _retry(value: Any) -> int:
    if value is None:
        return rules.RETRY_DEFAULT
    retry = _int_value(value, "retry")
    return -1 if retry < 0 else min(retry, rules.RETRY_MAX)


def _at(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidJob("at must be an RFC 3339 timestamp string")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidJob(f"invalid at {value!r}: use RFC 3339, e.g. 2030-01-02T03:04:05Z") from None
    if at.tzinfo is None:
        raise InvalidJob(f"invalid at {value!r}: it needs a time zone (Z or +hh:mm)")
    try:
        return check_time(at)
    except ValueError:
        raise InvalidJob(f"invalid at {value!r}: it {OUT_OF_RANGE}") from None


def _json_problem(value: Any) -> str | None:
    """What PostgreSQL's jsonb cannot store faithfully (NUL characters, integers beyond 64 bits,
    non-finite numbers, deep nesting), or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, str):
            if "\x00" in item:
                return "strings must not contain NUL characters"
            if not _is_unicode(item):
                return "strings must not contain lone surrogates (\\ud800-\\udfff)"
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -INT64 <= item < INT64:
                return "integers must fit in 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "numbers must be finite"
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, dict):
            for k, v in item.items():
                if "\x00" in k or not _is_unicode(k):
                    return "keys must not contain NUL characters or lone surrogates"
                stack.append((v, depth + 1))
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
