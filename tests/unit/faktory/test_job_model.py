"""FWP validates a pushed job with the model HTTP uses (``domain.bodies.JobPush``): apart from
Faktory's own rules (jid and args required, unknown keys dropped, priority 1..9, numbers cut to
Werk's bounds), a job one path refuses the other refuses, and one both take becomes the same
JobPush."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from werk.domain.bodies import JobPush
from werk.faktory.jobs import InvalidJob, job_spec


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


BASE = {"jid": "samejob-1", "jobtype": "t", "args": []}

# Fields FWP passes to the model as sent.
AS_SENT: list[tuple[str, Any]] = [
    ("jid", "abc"),
    ("jid", "a" * 101),
    ("jid", "tenant/a/job-0001"),
    ("jid", ".hidden-job"),
    ("jid", "jöb-00000001"),
    ("jid", 12345678),
    ("jobtype", ""),
    ("jobtype", "t" * 201),
    ("jobtype", "t\x00"),
    ("jobtype", "t\ud800"),
    ("jobtype", 5),
    ("args", {"a": 1}),
    ("args", [2**63]),
    ("args", [-(2**63) - 1]),
    ("args", [float("nan")]),
    ("args", [{"k\x00": 1}]),
    ("args", [_nested(64)]),  # 65 levels
    ("queue", "no spaces"),
    ("queue", "q" * 101),
    ("queue", 1),
    ("custom", [1]),
    ("custom", {"k": "\ud800"}),
    ("at", 1700000000),
    ("at", "tomorrow"),
    ("at", "2030-01-02T03:04:05"),
    ("at", "20300102T030405Z"),
    ("at", "0001-01-01T00:00:00+14:00"),
    ("priority", "5"),
    ("priority", True),
    ("priority", 5.5),
    ("reserve_for", 86_401),
    ("reserve_for", "60"),
    ("retry", "x"),
    ("retry", False),
    ("backtrace", 1.5),
]
VALID: list[tuple[str, Any]] = [
    ("jid", "tenant:a:job-1"),
    ("args", [2**63 - 1, -(2**63), 1.5, "é", {"k": [None, True]}]),
    ("queue", "a.b_c-1"),
    ("custom", {"k": {"deep": [1]}}),
    ("at", "2030-01-02T03:04:05.123456789+02:00"),
    ("reserve_for", 86_400),
    ("retry", 7.0),
    ("backtrace", 20),
]


def _http(job: dict[str, Any]) -> JobPush | None:
    """The job as the HTTP push decodes it (from JSON; a lone surrogate, which no JSON encoder
    writes raw, sent escaped)."""
    try:
        return msgspec.json.decode(json.dumps(job).encode(), type=JobPush)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def _fwp(job: dict[str, Any]) -> JobPush | None:
    try:
        return job_spec(job)
    except InvalidJob as exc:
        assert "\n" not in str(exc)
        return None


@pytest.mark.parametrize(("field", "value"), AS_SENT + VALID)
def test_fwp_and_http_take_the_same_jobs(field: str, value: Any) -> None:
    job = {**BASE, field: value}
    assert _fwp(job) == _http(job)
    assert (_http(job) is None) == ((field, value) in AS_SENT)


@pytest.mark.parametrize(("field", "value"), AS_SENT)
def test_fwp_names_the_field_it_refuses(field: str, value: Any) -> None:
    with pytest.raises(InvalidJob, match=field):
        job_spec({**BASE, field: value})


def test_fwp_applies_faktorys_rules_before_the_model() -> None:
    spec = job_spec(
        {
            **BASE,
            "priority": 9,
            "reserve_for": 10,
            "retry": -5,
            "backtrace": 5000,
            "x": 1,
            "queue": "",
            "at": "",
        }
    )
    assert (spec.priority, spec.reserve_for, spec.retry, spec.backtrace) == (4, 60, -1, 1000)
    assert (spec.queue, spec.at) == ("default", None)
    assert job_spec({**BASE, "reserve_for": 0, "priority": -50}).reserve_for == 1800
    assert job_spec({**BASE, "priority": 5000}).priority == 1000
    for missing in ("jid", "args"):
        with pytest.raises(InvalidJob, match=missing):
            job_spec({k: v for k, v in BASE.items() if k != missing})
