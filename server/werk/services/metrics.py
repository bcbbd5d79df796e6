"""Prometheus metrics in the text exposition format (0.0.4), written without a client library.

Job counters come from werk_counters (they survive job deletion and agree on every node);
gauges from one grouped read of the jobs index (see queue_list.sql). Labels are bounded: queue,
state, method, route template and status — never a jid or a wid. A scrape is three short
queries; a scrape arriving within ``cache_seconds`` of the previous one reuses its database part.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from werk.db import admin_queries, batch_queries
from werk.domain.batches import CALLBACK_KINDS
from werk.domain.clock import Clock
from werk.domain.job import JobState, WorkerState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.name = name

    def add(self, value: float, *labels: tuple[str, str], suffix: str = "") -> None:
        self.lines.append(f"{self.name}{suffix}{_labels(labels)} {_number(value)}")


class RequestDurations:
    """A histogram of HTTP request durations by method, route template and status code.

    Each request adds one to the first bucket that holds it (found by bisection); the rendering
    sums them into Prometheus' cumulative buckets, so a request costs one increment, not one
    per bucket."""

    def __init__(self, buckets: Sequence[float] = DURATION_BUCKETS) -> None:
        self._buckets = tuple(buckets)
        self._series: dict[tuple[str, str, str], list[float]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, str(status))
        series = self._series.get(key)
        if series is None:  # a count per bucket and one beyond the last, then sum and count
            series = self._series[key] = [0.0] * (len(self._buckets) + 3)
        series[bisect.bisect_left(self._buckets, seconds)] += 1
        series[-2] += seconds
        series[-1] += 1

    def render(self) -> list[str]:
        name = "werk_http_request_duration_seconds"
        family = _Family(name, "histogram", "HTTP request duration by route template.")
        for (method, route, status), series in sorted(self._series.items()):
            base = (("method", method), ("route", route), ("status", status))
            cumulative = itertools.accumulate(series[: len(self._buckets)])
            for bound, count in zip(self._buckets, cumulative, strict=True):
                family.add(count, *base, ("le", _number(bound)), suffix="_bucket")
            family.add(series[-1], *base, ("le", "+Inf"), suffix="_bucket")
            family.add(series[-2], *base, suffix="_sum")
            family.add(series[-1], *base, suffix="_count")
        return family.lines


class MetricsService:
    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        durations: RequestDurations,
        *,
        cache_seconds: float = 1.0,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._durations = durations
        self._cache_seconds = cache_seconds
        self._cached: tuple[float, list[str]] | None = None
        self._lock = asyncio.Lock()

    async def render(self) -> str:
        lines = [*await self._database_part(), *self._durations.render()]
        return "\n".join(lines) + "\n"

    async def _database_part(self) -> list[str]:
        async with self._lock:  # concurrent scrapes share one set of queries
            cached = self._cached
            if cached is not None and time.monotonic() - cached[0] < self._cache_seconds:
                return cached[1]
            queues = await admin_queries.list_queues(self._pool, self._clock.now())
            counters, workers = await admin_queries.metrics_counters(self._pool)
            batches = await batch_queries.batch_metrics(self._pool)
            lines = [*_database_lines(queues, counters, workers), *_batch_lines(batches)]
            self._cached = (time.monotonic(), lines)
            return lines


def _database_lines(
    queues: Sequence[admin_queries.QueueRow],
    counters: Sequence[admin_queries.QueueCounters],
    workers: dict[str, int],
) -> Iterable[str]:
    families = (
        ("werk_jobs_pushed_total", "Jobs pushed (new jids only), per queue.", "pushed"),
        (
            "werk_jobs_processed_total",
            "Attempts finished (acked or failed), per queue.",
            "processed",
        ),
        (
            "werk_jobs_failed_total",
            "Attempts that failed (expired leases included), per queue.",
            "failed",
        ),
        (
            "werk_jobs_expired_total",
            "Jobs not started by their expires_at, never run, per queue.",
            "expired",
        ),
    )
    for name, help_text, field in families:
        family = _Family(name, "counter", help_text)
        for c in counters:
            family.add(getattr(c, field), ("queue", c.queue))
        yield from family.lines
    expired = _Family(
        "werk_leases_expired_total",
        "counter",
        "Leases released by the server: reservation expired or worker lost.",
    )
    expired.add(sum(c.leases_expired for c in counters))
    yield from expired.lines

    jobs = _Family("werk_jobs", "gauge", "Jobs stored, per queue and state.")
    latency = _Family(
        "werk_queue_latency_seconds", "gauge", "Age of the queue's oldest available job."
    )
    paused = _Family("werk_queue_paused", "gauge", "1 while the queue is paused.")
    # A queue that once had jobs keeps its series (at zero) rather than vanishing.
    known = {q.name for q in queues}
    idle = [
        admin_queries.QueueRow(c.queue, 0, 0.0, False, {}) for c in counters if c.queue not in known
    ]
    for q in sorted([*queues, *idle], key=lambda q: q.name):
        for state in JobState:
            if state is JobState.COMPLETED and state.value not in q.counts:
                continue  # only present when completed jobs are retained
            jobs.add(q.counts.get(state.value, 0), ("queue", q.name), ("state", state.value))
        latency.add(q.latency_seconds, ("queue", q.name))
        paused.add(1 if q.paused else 0, ("queue", q.name))
    yield from jobs.lines
    yield from latency.lines
    yield from paused.lines

    alive = _Family("werk_workers", "gauge", "Live worker processes (beating).")
    alive.add(sum(workers.values()))
    yield from alive.lines
    instructed = _Family(
        "werk_workers_by_state", "gauge", "Live worker processes by instructed state."
    )
    for worker_state in WorkerState:
        instructed.add(workers.get(worker_state.value, 0), ("state", worker_state.value))
    yield from instructed.lines


def _batch_lines(row: Any) -> Iterable[str]:
    batches = _Family("werk_batches", "gauge", "Batches stored, by state.")
    for state in ("open", "committed", "finished"):
        batches.add(row[state], ("state", state))
    yield from batches.lines
    released = _Family(
        "werk_batch_callbacks_released",
        "gauge",
        "Callbacks of the batches stored that were released, by kind.",
    )
    for kind in CALLBACK_KINDS:
        released.add(row[kind], ("kind", kind))
    yield from released.lines
