"""bench's peers scenario sets Werk's TypeScript and Go clients beside its Python SDK round by
round: each run is paired with the Python run of its own round, and a round Python missed pairs
with nothing."""

from __future__ import annotations

from typing import Any

from bench.peers.harness import beside_python


def run(round_: int, rate: float, p50_ms: float) -> dict[str, Any]:
    rows: dict[str, Any] = {k: {"rate": rate} for k in ("push1", "push8", "batch", "work")}
    return {"round": round_, **rows, "latency": {"p50_ms": p50_ms, "p99_ms": 2 * p50_ms}}


def test_each_client_is_paired_with_pythons_run_of_the_same_round() -> None:
    runs = {
        # Python's second round failed: the clients' second rounds are left unpaired.
        "werk-py": [run(0, 1000, 2.0), run(2, 500, 1.0)],
        "werk-ts": [run(0, 1100, 1.0), run(1, 1, 100.0), run(2, 400, 2.0)],
        "werk-go": [run(0, 900, 4.0), run(2, 600, 1.0)],
    }
    table = beside_python(runs).splitlines()
    assert table[2].startswith("| client | push, 1 at a time |")
    assert table[2].endswith("| push→handler p50 |")
    # ts: rates 1.1 and 0.8 of Python's, latency 2.0 and 0.5: medians 0.95, 1.25
    assert table[4] == "| werk-ts |" + " 0.95 x (1 of 2) |" * 4 + " 1.25 x (1 of 2) |"
    # go: rates 0.9 and 1.2, latency 0.5 and 1.0: medians 1.05, 0.75
    assert table[5] == "| werk-go |" + " 1.05 x (1 of 2) |" * 4 + " 0.75 x (1 of 2) |"
    assert len(table) == 6


def test_nothing_to_set_beside_without_python_or_its_other_clients() -> None:
    assert beside_python({"werk-ts": [run(0, 1, 1.0)]}) == ""
    assert beside_python({"werk-py": [run(0, 1, 1.0)], "pgqueuer": [run(0, 1, 1.0)]}) == ""
