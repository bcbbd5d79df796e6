"""The fault suite's moving parts: worker fleets, a failover producer, the ledger, and a report.

The ledger is the truth: every handler run appends "jid wid attempt". At the end of a scenario each
pushed job must have run at least once (or be dead for a stated reason); runs beyond the first are
re-runs, which at-least-once delivery allows only after a lease was lost, and are reported.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from tests.support.helpers import sql
from tests.support.server import clean_env

WORKER = Path(__file__).with_name("worker.py")
ROOT = Path(__file__).resolve().parents[3]
REPORT = ROOT / "test-artifacts" / "fault-report.jsonl"

# Servers in the fault suite notice lost workers quickly, so scenarios stay short.
FAST_SERVER = {
    "WERK_WORKER_TIMEOUT": "2",
    "WERK_MAINTENANCE_INTERVAL": "0.25",
    "WERK_POLL_INTERVAL": "0.25",
}


class Fleet:
    """Worker processes (tests/e2e/faults/worker.py) that can be killed with SIGKILL."""

    def __init__(self, urls: list[str], ledger: Path, concurrency: int = 4) -> None:
        self.urls = urls
        self.ledger = ledger
        self.concurrency = concurrency
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._n = 0

    def spawn(self) -> str:
        self._n += 1
        wid = f"fault-w{self._n}"
        cmd = [
            sys.executable,
            str(WORKER),
            "--wid",
            wid,
            "--ledger",
            str(self.ledger),
            "--concurrency",
            str(self.concurrency),
        ]
        for url in self.urls:
            cmd += ["--url", url]
        self.procs[wid] = subprocess.Popen(
            cmd, env=clean_env({"PYTHONPATH": str(ROOT)}), stdout=subprocess.DEVNULL
        )
        return wid

    def kill9(self, wid: str) -> None:
        self.procs[wid].kill()
        self.procs[wid].wait(10)

    def replace_dead(self) -> int:
        """Start a new worker for each one that died on its own (e.g. a poison pill)."""
        dead = [wid for wid, p in self.procs.items() if p.poll() is not None]
        for wid in dead:
            del self.procs[wid]
            self.spawn()
        return len(dead)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def read_ledger(path: Path) -> Counter[str]:
    if not path.exists():
        return Counter()
    return Counter(line.split()[0] for line in path.read_text().splitlines() if line.strip())


async def push_with_failover(urls: list[str], jobs: list[dict], batch: int = 100) -> None:
    """Push every job, retrying on any server until stored; jids make retries idempotent."""
    async with httpx.AsyncClient(timeout=10) as http:
        for i in range(0, len(jobs), batch):
            chunk = jobs[i : i + batch]
            deadline = time.monotonic() + 60
            stored = False
            while not stored:
                for url in urls:
                    try:
                        r = await http.post(url + "/v1/jobs/batch", json={"jobs": chunk})
                    except httpx.TransportError:
                        continue
                    if r.status_code == 201:
                        stored = True
                        break
                    assert r.status_code in (502, 503, 504), r.text
                if not stored:
                    assert time.monotonic() < deadline, "could not push"
                    await asyncio.sleep(0.2)


async def fast_forward_retries(database_url: str) -> None:
    """Make retries due now. The fault suite checks for lost and doubled jobs, not backoff timing
    (which tests/integration/test_work.py covers with an injected clock); this is its clock skip."""
    await sql(
        database_url,
        "UPDATE werk_jobs SET run_at = now() WHERE state = 'scheduled' AND run_at > now()",
    )


async def states(database_url: str) -> dict[str, int]:
    """Jobs stored per state, kept completed ones (werk_completed_jobs) too."""
    rows = await sql(
        database_url, "SELECT state::text, count(*) AS n FROM werk_stored_jobs GROUP BY 1"
    )
    return {r["state"]: r["n"] for r in rows}


async def settle(database_url: str, fleet: Fleet, timeout: float) -> None:
    """Until no job is waiting or running (only dead and kept completed ones may remain)."""
    deadline = time.monotonic() + timeout
    while True:
        left = await states(database_url)
        if not set(left) - {"dead", "completed"}:
            return
        assert time.monotonic() < deadline, f"not settled: {left}"
        fleet.replace_dead()
        await fast_forward_retries(database_url)
        await asyncio.sleep(0.25)


@dataclass
class Outcome:
    scenario: str
    pushed: int
    completed: int
    reruns: int
    dead: int
    lost: int
    recovery_seconds: list[float] = field(default_factory=list)
    notes: str = ""

    def record(self) -> None:
        REPORT.parent.mkdir(exist_ok=True)
        with REPORT.open("a") as f:
            f.write(json.dumps({**asdict(self), "pid": os.getpid(), "at": time.time()}) + "\n")
        print(f"\nFAULT {self.scenario}: {json.dumps(asdict(self))}")


async def ledger_outcome(
    scenario: str, database_url: str, ledger: Path, jids: list[str], **extra: object
) -> Outcome:
    runs = read_ledger(ledger)
    dead_rows = await sql(database_url, "SELECT jid FROM werk_jobs WHERE state = 'dead'")
    dead = {r["jid"] for r in dead_rows}
    completed = [j for j in jids if runs[j] >= 1 and j not in dead]
    lost = [j for j in jids if runs[j] == 0 and j not in dead]
    outcome = Outcome(
        scenario=scenario,
        pushed=len(jids),
        completed=len(completed),
        reruns=sum(max(runs[j] - 1, 0) for j in jids),
        dead=len(dead & set(jids)),
        lost=len(lost),
        **extra,  # type: ignore[arg-type]
    )
    outcome.record()
    return outcome
