"""Toolchains of the non-Python clients. A missing toolchain skips its suite loudly (a warning
plus a skip reason naming the command that installs it), never silently."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TS_DIR = ROOT / "client" / "typescript"
GO_DIR = ROOT / "client" / "go"

NODE_INSTALL = "apt-get install -y nodejs npm (Node.js >= 20)"
GO_INSTALL = "apt-get update && apt-get install -y golang-go"
JAVA_INSTALL = "apt-get update && apt-get install -y default-jre-headless (Java >= 11)"


def skip_loudly(message: str) -> None:
    warnings.warn(message, stacklevel=2)
    pytest.skip(message)


def run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str:
    """The command's output; it fails the test on a non-zero exit or after ``timeout`` seconds.
    The command runs in a session of its own so a timeout kills what it started too (node --test
    runs each test file in a child process), and the failure shows what it printed until then."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"`{' '.join(cmd)}` in {cwd} timed out after {timeout} s:\n"
                    f"{stdout[-6000:]}\n{stderr[-6000:]}")  # fmt: skip
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` in {cwd} failed ({proc.returncode}):\n"
                    f"{stdout[-6000:]}\n{stderr[-6000:]}")  # fmt: skip
    return stdout


def node_found() -> tuple[str, str]:
    """Node >= 20 and npm, as a user of the package has them (nothing installed in the SDK)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        skip_loudly(f"TypeScript client tests SKIPPED: node/npm not found; install: {NODE_INSTALL}")
    assert node is not None and npm is not None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    if int(version.stdout.strip().lstrip("v").split(".")[0]) < 20:
        found = version.stdout.strip()
        skip_loudly(f"TypeScript client tests SKIPPED: node {found} < 20; {NODE_INSTALL}")
    return node, npm


def node_ready() -> str:
    """Node with the TypeScript SDK's devDependencies installed (npm ci, cached in node_modules,
    redone when package-lock.json changes) and compiled to dist/ (tsc, incremental)."""
    node, npm = node_found()
    installed = TS_DIR / "node_modules" / ".package-lock.json"  # written by npm
    lock = TS_DIR / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        run([npm, "ci", "--no-audit", "--no-fund"], TS_DIR, timeout=300)
    run([node, "node_modules/typescript/bin/tsc", "-p", "."], TS_DIR, timeout=180)
    return node


def java_ready() -> str:
    """Java for OpenAPI Generator (its PyPI package runs the bundled jar with ``java``)."""
    java = shutil.which("java")
    if java is None:
        skip_loudly(
            f"OpenAPI Generator client test SKIPPED: java not found; install: {JAVA_INSTALL}"
        )
    assert java is not None
    return java


def go_env() -> dict[str, str]:
    """Go with every cache inside the repository (gitignored) and no network: the module uses
    the standard library only."""
    go = shutil.which("go")
    if go is None:
        skip_loudly(f"Go client tests SKIPPED: go not found; install: {GO_INSTALL}")
    cache = GO_DIR / ".cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
    env.update(
        GOCACHE=str(cache / "build"),
        GOPATH=str(cache / "gopath"),
        GOFLAGS="-mod=mod",
        GOPROXY="off",
        GOTOOLCHAIN="local",
        GO111MODULE="on",
    )
    return env
