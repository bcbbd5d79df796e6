"""The two batch bodies every busy producer and worker sends, decoded by msgspec for
werk.api.direct's plain case.

msgspec decodes a whole typed batch in one pass without building a validator object per item,
which makes large batches cheaper for the server than the pydantic models. The models in
``schemas`` stay the contract: they are what FastAPI validates and documents, and what answers a
body these decoders refuse. So a decoder here may refuse more than its model (it then returns
None and the model decides, with its own errors), never less, and what it takes it reads as the
model does. tests/integration/test_fast_bodies.py compares the two on generated bodies.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from werk.domain import job as rules
from werk.domain.job import JobSpec
from werk.domain.json_values import check_json, check_text


def _anchored(pattern: str) -> str:
    """msgspec searches with Python's re, whose "$" also matches before a final newline; the
    model's (Rust) "$" does not."""
    return pattern.removesuffix("$") + r"\Z"


_StoredJid = Annotated[
    str, msgspec.Meta(min_length=rules.JID_MIN_LENGTH, max_length=rules.JID_MAX_LENGTH)
]
_Jid = Annotated[
    str,
    msgspec.Meta(
        min_length=rules.JID_MIN_LENGTH,
        max_length=rules.JID_MAX_LENGTH,
        pattern=_anchored(rules.JID_PATTERN),
    ),
]
_Lease = Annotated[str, msgspec.Meta(min_length=1, max_length=rules.LEASE_MAX_LENGTH)]


def _storable(texts: list[str]) -> bool:
    """The models' text rule (``check_text``; msgspec itself refuses only lone surrogates)."""
    try:
        check_text("".join(texts))
    except ValueError:
        return False
    return True


class _Ack(msgspec.Struct, forbid_unknown_fields=True):
    jid: _StoredJid
    lease: _Lease


class AckBatch(msgspec.Struct, forbid_unknown_fields=True):
    """``schemas.AckBatch``."""

    acks: Annotated[list[_Ack], msgspec.Meta(min_length=1, max_length=10_000)]

    def pairs(self) -> list[tuple[str, str]]:
        return [(a.jid, a.lease) for a in self.acks]


class _Job(msgspec.Struct, forbid_unknown_fields=True):
    """``bodies.JobPush`` without ``at``: a job that names a time goes to the model, whose
    RFC 3339 reading this need not copy; so does one with null for an optional key other than
    ``jid`` (null means not given: the model drops it)."""

    jobtype: Annotated[str, msgspec.Meta(min_length=1, max_length=rules.JOBTYPE_MAX_LENGTH)]
    jid: _Jid | None = None
    args: list[Any] = msgspec.field(default_factory=list)
    queue: Annotated[str, msgspec.Meta(pattern=_anchored(rules.QUEUE_PATTERN))] = "default"
    priority: Annotated[int, msgspec.Meta(ge=rules.PRIORITY_MIN, le=rules.PRIORITY_MAX)] = 0
    reserve_for: Annotated[
        int, msgspec.Meta(ge=rules.RESERVE_FOR_MIN, le=rules.RESERVE_FOR_MAX)
    ] = rules.RESERVE_FOR_DEFAULT
    retry: Annotated[int, msgspec.Meta(ge=rules.RETRY_MIN, le=rules.RETRY_MAX)] = (
        rules.RETRY_DEFAULT
    )
    backtrace: Annotated[int, msgspec.Meta(ge=0, le=rules.BACKTRACE_MAX_LINES)] = 0
    custom: dict[str, Any] = msgspec.field(default_factory=dict)


class JobBatchPush(msgspec.Struct, forbid_unknown_fields=True):
    """``schemas.JobBatchPush``."""

    jobs: Annotated[list[_Job], msgspec.Meta(min_length=1, max_length=10_000)]

    def specs(self) -> list[JobSpec]:
        return [
            JobSpec(
                jobtype=j.jobtype,
                args=j.args,
                queue=j.queue,
                jid=j.jid,
                priority=j.priority,
                reserve_for=j.reserve_for,
                retry=j.retry,
                backtrace=j.backtrace,
                custom=j.custom,
            )
            for j in self.jobs
        ]


_decode_acks = msgspec.json.Decoder(AckBatch).decode
_decode_jobs = msgspec.json.Decoder(JobBatchPush).decode


# msgspec decodes nested JSON by recursion: a body nested thousands deep raises RecursionError.
_REFUSED = (msgspec.DecodeError, RecursionError)  # (a ValidationError is a DecodeError)


def ack_batch(body: bytes) -> AckBatch | None:
    try:
        batch = _decode_acks(body)
    except _REFUSED:
        return None
    return batch if _storable([a.jid for a in batch.acks]) else None


def job_batch_push(body: bytes) -> JobBatchPush | None:
    try:
        batch = _decode_jobs(body)
    except _REFUSED:
        return None
    jobs = batch.jobs
    if not _storable([j.jobtype for j in jobs]):
        return None
    try:
        for j in jobs:
            if j.args:
                check_json(j.args)
            if j.custom:
                check_json(j.custom)
    except ValueError:
        return None
    return batch
