"""Real `werk serve` processes for end-to-end, multi-process and fault tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment minus any WERK_* setting, so a developer's shell cannot leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
    env.update(extra or {})
    return env


class ServerProcess:
    def __init__(self, database_url: str, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.database_url = database_url
        self.log_path = log_dir / f"werk-{self.port}.log"
        settings = {
            "WERK_DATABASE_URL": database_url,
            "WERK_PORT": str(self.port),
            "WERK_HOST": "127.0.0.1",
            "WERK_LOG_LEVEL": "warning",
            "WERK_FAKTORY_PORT": "0",
        }
        settings.update(env or {})
        self._env = clean_env(settings)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> ServerProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "werk.cli", "serve"],
            env=self._env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"werk serve exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"werk serve not ready in {timeout}s: {self.log_path.read_text()}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no chance to clean up."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self, timeout: float = 40) -> int | None:
        """SIGTERM and wait for a graceful exit."""
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
