"""What the tests of the benchmark harness share."""

from __future__ import annotations

from bench.scenarios import Context
from bench.target import Target


def bench_context(database_url: str, jobs: int, url: str = "http://127.0.0.1:9") -> Context:
    """A bench Context for small runs in tests (no waiting for a quiet machine, no sampling)."""
    return Context(
        target=Target(url=url, database_url=database_url),
        jobs=jobs,
        repeat=1,
        backlog=0,
        dead=0,
        in_flight=0,
        churn=0,
        churn_first=0,
        latency_jobs=0,
        latency_interval=0.01,
        idle_polls=0,
        idle_settle=0.0,
        idle_window=0.0,
        push_clients=[1],
        batch_sizes=[10],
        batch_clients=1,
        work_workers_1=1,
        work_workers_100=1,
        churn_producers=1,
        churn_workers=1,
        sample_waits=False,
    )
