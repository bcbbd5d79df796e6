"""The job model: its vocabulary, limits and defaults (shared by validation and the schema's
CHECKs), a job as it is written, and what pushing and failing answer (a job as a producer asks
for it is werk.domain.bodies.JobPush)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

# A queue name is a URL path segment too (/v1/queues/{queue}/pause): never "." or "..", which
# clients and browsers resolve as dot segments, so every queue a producer can fill can be named.
# No lookahead: Go's regexp and the OpenAPI document's readers take the pattern as it stands.
QUEUE_PATTERN = (
    r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}"
    r"|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}"
    r"|\.\.[A-Za-z0-9._-]{1,98})$"
)
QUEUE_NAMES = "1-100 characters from A-Z a-z 0-9 . _ -, but not . or .. alone"
# A jid is a URL path segment as it stands: characters no client or proxy encodes or rewrites,
# never "." or "..", so every jid the server accepts can be named in /v1/jobs/{jid}/....
JID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._~:@+=-]*$"
JID_MIN_LENGTH = 8
JID_MAX_LENGTH = 100
JOBTYPE_MAX_LENGTH = 200
RESERVE_FOR_MIN = 60
RESERVE_FOR_MAX = 86_400
RESERVE_FOR_DEFAULT = 1800
RETRY_DEFAULT = 25
RETRY_MIN = -1  # dead on the first failure
RETRY_MAX = 1000
PRIORITY_MIN = -1000
PRIORITY_MAX = 1000
ERRTYPE_MAX_LENGTH = 200
MESSAGE_MAX_LENGTH = 10_000
BACKTRACE_MAX_LINES = 1000
FETCH_MAX_COUNT = 100
# A worker's memory as it reports it: well inside 2**53, so clients that hold numbers as doubles
# compare the bound exactly.
RSS_KB_MAX = 2**50
LEASE_MAX_LENGTH = 100  # what a client may send; the server's leases are UUIDs
KEEP_RESULT_FOR_MAX = 365 * 86_400
# A unique lock's time bound and an expiry's delay: up to ten years, in seconds.
SECONDS_MAX = 10 * 366 * 86_400
UNIQUE_KEY_MAX_LENGTH = 200
UNIQUE_BY_MAX_PATHS = 20
UNIQUE_PATH_MAX_LENGTH = 200
# A path into the job for a unique key: "args" or "custom", then dot-separated keys or indexes.
UNIQUE_PATH_PATTERN = r"^(args|custom)(\.[^.\x00]+)*$"


class UniqueUntil(StrEnum):
    """How long a unique job holds its lock (besides its time bound)."""

    SUCCESS = "success"  # until it is acked (or dead, expired, cancelled)
    START = "start"  # until a worker takes it


class OnConflict(StrEnum):
    """What a push does when another job holds its unique key."""

    REJECT = "reject"  # refuse it, naming the holder
    EXISTING = "existing"  # answer with the holder, as if it had been pushed
    REPLACE = "replace"  # a waiting holder takes this push's args and at


class JobState(StrEnum):
    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    ACTIVE = "active"
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"
    EXPIRED = "expired"  # not started by its expires_at: never run
    WAITING = "waiting"  # some of its dependencies (depends_on) are not settled
    SKIPPED = "skipped"  # a dependency ended badly and its policy said skip: never run


# The states a job leaves by running; every other state is final (a waiter for its result has
# its answer). Expired and skipped jobs, never run, are final too.
UNSETTLED_STATES = frozenset(
    {JobState.SCHEDULED, JobState.AVAILABLE, JobState.ACTIVE, JobState.WAITING}
)
# The longest depends_on list a job may carry, and the longest ref.
DEPENDS_ON_MAX = 10_000
REF_MAX_LENGTH = 100


class DependencyPolicy(StrEnum):
    """What a job does when a dependency ends dead, expired, cancelled, skipped or deleted."""

    FAIL = "fail"  # it goes dead too, naming the cause (skipped if the dependency was skipped)
    SKIP = "skip"  # it is skipped: finished, never run
    IGNORE = "ignore"  # it runs anyway, once its other dependencies are settled


def is_settled(state: str) -> bool:
    return state not in UNSETTLED_STATES


def retries_remaining(state: str, retry: int, retry_count: int) -> int:
    """The automatic retries a job has left: none once it is dead, whatever its policy said
    (a failure with ``retry: false`` kills a job that had retries to spare)."""
    return 0 if state == JobState.DEAD else max(retry - retry_count, 0)


class FailOutcome(StrEnum):
    """What a failure did to the job."""

    SCHEDULED = "scheduled"  # will be retried after a backoff
    DEAD = "dead"
    DISCARDED = "discarded"  # retry = 0: dropped, as in Faktory


class WorkerState(StrEnum):
    """A worker process's instructed state; it only moves forward."""

    RUNNING = "running"
    QUIET = "quiet"
    TERMINATE = "terminate"


# The job classes below are not frozen: batches build thousands of them, and a frozen
# dataclass's __init__ sets every field through object.__setattr__.


@dataclass(slots=True)
class DependencyEdge:
    """One dependency as it is written: ``jid`` depends on ``dep`` (named at push by ``ref``,
    or by its jid: None)."""

    jid: str
    dep: str
    on_failure: DependencyPolicy
    ref: str | None


@dataclass(slots=True)
class UniqueLock:
    """A job's unique lock as it is written: its key, its time bound in seconds (from ``at``
    or now) and what the producer asked (JSON text of an object, shown with the job)."""

    key: str
    seconds: float | None
    until: UniqueUntil
    on_conflict: OnConflict
    spec: str


@dataclass(slots=True)
class NewJob:
    """A job as it is written: its jid decided, its JSON encoded."""

    jid: str
    jobtype: str
    queue: str
    args: str  # JSON text of an array
    priority: int
    reserve_for: int
    retry: int
    backtrace: int
    custom: str  # JSON text of an object
    at: datetime | None
    keep_result_for: int | None = None  # None: deleted at ack (0 is stored as None)
    expires_at: datetime | None = None
    expires_in: float | None = None  # seconds from ``at`` (or now): expires_at then
    unique: UniqueLock | None = None
    batch: str | None = None
    # The server made the jid for this push (werk.domain.jids): no other job, kept or not, has it.
    minted: bool = False


@dataclass(slots=True)
class PushResult:
    """``job`` is the stored job or, for a job inserted by a push that handed none of its jobs
    to a fetch, only the columns the statement decided (the push statement's "decided"
    answer); the rest of that job is ``sent``, as stored."""

    job: Mapping[str, Any]
    created: bool
    sent: NewJob | None = None
    # Another job held this push's unique key: what was done (reject, existing or replace).
    conflict: OnConflict | None = None


@dataclass(frozen=True, slots=True)
class FailResult:
    jid: str
    outcome: FailOutcome
    next_at: datetime | None
