"""The job's vocabulary and limits, shared by validation and the schema's CHECKs."""

from __future__ import annotations

from enum import StrEnum

QUEUE_PATTERN = r"^[A-Za-z0-9._-]{1,100}$"
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
LEASE_MAX_LENGTH = 100  # what a client may send; the server's leases are UUIDs


class JobState(StrEnum):
    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    ACTIVE = "active"
    COMPLETED = "completed"
    DEAD = "dead"
    CANCELLED = "cancelled"


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
