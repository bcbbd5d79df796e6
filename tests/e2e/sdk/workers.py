"""Start and stop real `werk-worker` processes for the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")

# Fast timings so that tests never wait out production intervals.
FAST = {
    "WERK_BEAT_INTERVAL": "0.5",
    "WERK_FETCH_WAIT": "1",
    "WERK_GRACE": "5",
}


class WorkerProcess:
    """`python -m werk_client.worker_cli ... tests.e2e.sdk.jobs_app`, logging to a file."""

    def __init__(
        self,
        url: str,
        workdir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        module: str = "tests.e2e.sdk.jobs_app",
        name: str = "worker",
        program: list[str] | None = None,
    ) -> None:
        self.log_path = workdir / f"{name}-{time.monotonic_ns()}.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
        base.update(FAST)
        base.update({"WERK_URL": url, "SDK_TEST_DIR": str(workdir), "PYTHONUNBUFFERED": "1"})
        base.update(env or {})
        program = program or [sys.executable, "-m", "werk_client.worker_cli"]
        self._cmd = [*program, *args, module]
        self._env = base
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self._cmd, env=self._env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop(self, timeout: float = 20) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    @property
    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(check: Callable[[], T], timeout: float = 30, interval: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {check}")
        time.sleep(interval)


def lines(workdir: Path, name: str) -> list[str]:
    path = workdir / name
    return path.read_text().splitlines() if path.exists() else []
