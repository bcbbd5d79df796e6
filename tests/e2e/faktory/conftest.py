"""Fixtures for Faktory wire-protocol tests against real `werk serve` processes with FWP, and the
Node client's packages."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.server import ServerProcess, free_port

NODE_DIR = Path(__file__).parent / "node"
NODE_INSTALL = f"install Node.js >= 18 with npm, then: cd {NODE_DIR} && npm ci"


@dataclass
class FwpServer:
    process: ServerProcess
    port: int

    @property
    def url(self) -> str:
        return self.process.url

    def faktory_url(self, password: str | None = None) -> str:
        auth = f":{password}@" if password else ""
        return f"tcp://{auth}127.0.0.1:{self.port}"


@pytest.fixture
def fwp_server_factory(
    werk_server_factory: Callable[..., ServerProcess],
) -> Callable[..., FwpServer]:
    def start(**env: str) -> FwpServer:
        port = free_port()
        settings = {"WERK_FAKTORY_PORT": str(port), "WERK_MAINTENANCE_INTERVAL": "0.2"}
        settings.update(env)
        return FwpServer(werk_server_factory(env=settings), port)

    return start


@pytest.fixture
def fwp_server(fwp_server_factory: Callable[..., FwpServer]) -> FwpServer:
    return fwp_server_factory()


@pytest.fixture(scope="session")
def node_client() -> Path:
    """The npm faktory-worker package, installed from the committed lock file. Without Node the
    Node tests skip, loudly."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        message = f"Node client tests SKIPPED: node/npm not found; {NODE_INSTALL}"
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    installed = NODE_DIR / "node_modules" / ".package-lock.json"  # written by npm
    lock = NODE_DIR / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            pytest.fail(f"`npm ci` in {NODE_DIR} failed:\n{result.stdout}\n{result.stderr}")
    return NODE_DIR
