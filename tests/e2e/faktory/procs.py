"""Client processes (Python and Node workers) for the compatibility tests, and polling helpers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.helpers import sql

HERE = Path(__file__).parent
T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str, every: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def run_sql(database_url: str, query: str, *args: Any) -> list[Any]:
    return asyncio.run(sql(database_url, query, *args))


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ClientProcess:
    """A worker process; its output goes to a log file that failures show."""

    def __init__(self, argv: list[str], log: Path, cwd: Path | None = None) -> None:
        self.log = log
        self._log_file = log.open("ab")
        self.process = subprocess.Popen(
            argv, stdout=self._log_file, stderr=subprocess.STDOUT, cwd=cwd
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker did not exit within {timeout} s; output:\n{self.output()}"
            ) from None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log_file.close()


def python_worker(
    url: str, queues: str, wid: str, out: Path, log: Path, beat: float = 15
) -> ClientProcess:
    return ClientProcess(
        [sys.executable, str(HERE / "py_worker.py"), url, queues, wid, str(out), str(beat)], log
    )


def node_worker(
    node_dir: Path, url: str, queues: str, wid: str, out: Path, log: Path, beat: float = 15
) -> ClientProcess:
    return ClientProcess(
        ["node", "worker.js", url, queues, wid, str(out), str(beat)], log, cwd=node_dir
    )


def worker_row(database_url: str, wid: str) -> Any:
    rows = run_sql(database_url, "SELECT *, now() AS db_now FROM werk_workers WHERE wid = $1", wid)
    return rows[0] if rows else None


def set_worker_state(server_url: str, database_url: str, wid: str, state: str) -> Any:
    """Quiet or terminate a worker through the operator API; its next BEAT hears it. Returns
    the database time just after the change."""
    r = httpx.post(f"{server_url}/v1/workers/{wid}/{state}")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == state
    return run_sql(database_url, "SELECT now() AS now")[0]["now"]


def wait_for_beat_after(database_url: str, wid: str, since: Any, timeout: float) -> None:
    """Waits until the worker has beaten after ``since`` (so it has heard its new state)."""
    wait_for(
        lambda: (row := worker_row(database_url, wid)) is not None and row["last_beat_at"] > since,
        timeout,
        f"a BEAT from {wid}",
    )
