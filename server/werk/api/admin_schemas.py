"""Wire models of the admin API (jobs, queues, workers, history)."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated, Literal, TypeAlias

import msgspec
from pydantic import BaseModel, Field

from werk.api.schemas import Job
from werk.domain import job as rules
from werk.domain.bodies import (
    Body,
    MQueueName,
    MText,
    Nullable,
    integer,
    integral,
    texts,
    with_defaults,
)

# What the job list's and the bulk actions' q matches (werk_job_search, migration 0011).
Q_DESCRIPTION = (
    "Words: a job matches when each word begins a word of its args or custom values (strings, "
    "numbers, booleans; not keys), errtype or message, case-insensitively. Scheduled, retrying, "
    "dead, completed, expired and cancelled jobs are found through an index; available jobs are "
    "read per queue."
)

StateFilter = Literal[
    "scheduled",
    "retrying",
    "available",
    "active",
    "waiting",
    "completed",
    "dead",
    "cancelled",
    "expired",
    "skipped",
]
Order = Literal["newest", "oldest"]
SearchText = Annotated[MText, msgspec.Meta(min_length=1, max_length=200)]
JobtypeFilter = Annotated[MText, msgspec.Meta(min_length=1, max_length=rules.JOBTYPE_MAX_LENGTH)]
if TYPE_CHECKING:  # integer(): an int once the body's __post_init__ ran
    Limit: TypeAlias = int
else:
    Limit = integer(1, 10_000)


class JobPage(BaseModel):
    jobs: list[Job]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class BulkAction(Body):
    """Which jobs a bulk action covers (all filters optional) and how many at most."""

    state: Annotated[
        StateFilter | None,
        msgspec.Meta(description="`retrying` = scheduled jobs that failed before."),
    ] = None
    queue: MQueueName | None = None
    jobtype: JobtypeFilter | None = None
    q: Annotated[SearchText | None, msgspec.Meta(description=Q_DESCRIPTION)] = None
    failed: Annotated[
        bool | None, msgspec.Meta(description="Jobs that failed at least once (or never).")
    ] = None
    limit: Annotated[
        Nullable[Limit], msgspec.Meta(description="Change at most this many jobs.")
    ] = 1000

    def __post_init__(self) -> None:
        if self.limit is None:
            with_defaults(self, ("limit",))
        self.limit = integral(self.limit, "limit")
        texts(self, ("jobtype", "q"))


class BulkResult(BaseModel):
    action: Literal["retry", "kill", "cancel", "delete"]
    changed: int
    more: bool = Field(description="`changed` reached `limit`: repeat to cover more jobs.")


class QueueDetail(BaseModel):
    name: str
    size: int = Field(description="Available jobs (waiting to be fetched).")
    latency_seconds: float = Field(description="Age of the oldest available job.")
    paused: bool
    counts: dict[str, int] = Field(description="Jobs per state (states with none are absent).")


class QueueList(BaseModel):
    queues: list[QueueDetail]


class QueueCleared(BaseModel):
    queue: str
    deleted: int


class Worker(BaseModel):
    wid: str
    hostname: str
    pid: int | None
    labels: list[str]
    rss_kb: int | None
    reported_state: str | None = Field(description="What the worker last said it was doing.")
    state: rules.WorkerState = Field(description="What the server tells it (next beat).")
    started_at: datetime
    last_beat_at: datetime
    gone_at: datetime | None
    busy: int = Field(description="Jobs it holds now.")


class WorkerList(BaseModel):
    workers: list[Worker]


class WorkerSignalled(BaseModel):
    wid: str
    state: rules.WorkerState


class WorkersSignalled(BaseModel):
    changed: int


class HistoryDay(BaseModel):
    day: date
    processed: int
    failed: int
    pushed: int


class History(BaseModel):
    days: list[HistoryDay]
