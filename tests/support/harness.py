"""What the tests of the benchmark harness share."""

from __future__ import annotations

from bench.scenarios import Context
from bench.target import Target


def bench_context(database_url: str, jobs: int, url: str = "http://127.0.0.1:9") -> Context:
    """A bench Context for small runs in tests (no waiting for a quiet machine, no sampling)."""
    return Context.bare(Target(url=url, database_url=database_url), jobs)
