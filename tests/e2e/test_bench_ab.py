"""``python -m bench ab`` with tiny slices, this checkout on both sides: every scenario runs
against each side in every pair, the side going first swapped from one pair to the next, and
the databases it made are gone afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import asyncpg

from bench import ab
from bench.target import REPO


async def test_every_scenario_runs_on_both_sides_in_alternating_pairs(
    database_url: str, tmp_path: Path
) -> None:
    command = [
        *(sys.executable, "-m", "bench", "ab", "push-single", "push-batch", "work", "latency"),
        *("--old", str(REPO), "--pairs", "2", "--scale", "0.01"),
        *("--database-url", database_url, "--out", str(tmp_path)),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (written,) = tmp_path.glob("*-ab.json")
    record = json.loads(written.read_text())
    assert [r["name"] for r in record["results"]] == list(ab.SLICES)
    for r in record["results"]:
        assert len(r["old"]) == len(r["new"]) == len(r["ratios"]) == 2
        assert all(x > 0 for x in r["old"] + r["new"]), r
        assert r["order"] == [["old", "new"], ["new", "old"]]
    for name in ab.SLICES:
        assert name in proc.stdout
    conn = await asyncpg.connect(database_url)
    try:
        left = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE 'werk_ab_%'")
    finally:
        await conn.close()
    assert left == []
