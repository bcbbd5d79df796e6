"""`python -m bench summary` reads back what `floor` and `peers` recorded, as their runs printed
it: the floor's rates, its werk / least-server ratio and its idle round trips, and the peers'
tables."""

from __future__ import annotations

from typing import Any

from bench import summary


def peer_run(round_: int, rate: float) -> dict[str, Any]:
    cpu = {"cpu_us_per_job": {"driver": 5.0, "server": 6.0, "postgres": 7.0}}
    rows: dict[str, Any] = {k: {"rate": rate, **cpu} for k in ("push1", "push8", "batch", "work")}
    return {"round": round_, **rows, "latency": {"p50_ms": 2.0, "p99_ms": 4.0}}


def trips(p50: float) -> dict[str, Any]:
    """Each round trip its own p50: select_1 p50, the push twice it, /livez three times."""
    names = ("select_1", "push_one_job_sql", "http_livez")
    return {
        "interval_ms": 10.0,
        **{k: {"p50_ms": p50 * n, "p99_ms": 4 * p50} for n, k in enumerate(names, 1)},
    }


DOC: dict[str, Any] = {
    "server": {"workers": 1},
    "results": [
        {
            "scenario": "floor",
            "variant": "sql push batch=1000",
            "name": "floor sql push batch=1000",
            "min": 90_000.0,
            "median": 100_000.0,
            "cpu_us_per_job_median": {"client": 1.0, "server": 0.0, "postgres": 9.0},
        },
        {"scenario": "floor", "variant": "http push", "name": "floor http push", "ratio": 0.78},
        {
            "scenario": "floor",
            "variant": "idle round trips",
            "name": "floor idle",
            "runs": [trips(0.1), trips(0.3), trips(0.2)],
        },
        {
            "scenario": "sdk",
            "variant": "werk-worker fetch=100 async",
            "name": "sdk werk-worker fetch=100 async",
            "params": {"concurrency": 200, "jobs": 10_000},
            "min": 9_000.0,
            "median": 10_000.0,
            "cpu_us_per_job_median": {"client": 1.0, "server": 2.0, "postgres": 3.0, "worker": 4.0},
        },
        {
            "scenario": "peers",
            "variant": "werk-py",
            "name": "peers werk-py",
            "runs": [peer_run(0, 1000)],
        },
        {
            "scenario": "peers",
            "variant": "werk-go",
            "name": "peers werk-go",
            "runs": [peer_run(0, 1500)],
        },
    ],
}


def test_the_floors_rows_and_a_workers_concurrency() -> None:
    assert summary.rows(DOC) == [
        (
            "w1",
            "floor sql push batch=1000",
            "90,000 / 100,000 jobs/s",
            "",
            "server 0 + pg 9 us/job",
        ),
        ("w1", "floor http push", "werk / least server 0.78", "", ""),
        (
            "w1",
            "floor idle",
            "p50 ms: select_1 0.20; push_one_job_sql 0.40; http_livez 0.60",
            "",
            "",
        ),
        (
            "w1",
            "sdk werk-worker fetch=100 async concurrency=200",
            "9,000 / 10,000 jobs/s",
            "",
            "server 2 + pg 3 us/job; client 1.0 us/job; worker 4 us/job",
        ),
    ]


def test_the_peers_tables() -> None:
    lines = summary.peers_tables(DOC).splitlines()
    assert lines[2].startswith("| werk-py | 1,000 | 1,000 | 1,000 | 1,000 | 2.0 / 4.0 ms |")
    assert lines[3].startswith("| werk-go | 1,500 |")
    assert "| werk-go | 5 / 6 / 7 | 5 / 6 / 7 | 5 / 6 / 7 | 5 / 6 / 7 |" in lines
    assert "| werk-go |" + " 1.50 x (1 of 1) |" * 4 + " 1.00 x (1 of 1) |" in lines


def test_no_peers_no_tables() -> None:
    assert summary.peers_tables({"results": DOC["results"][:4]}) == ""
