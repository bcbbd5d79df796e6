"""What a result file records besides the numbers: machine, versions, commit, settings."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.target import REPO


def _git(*args: str, checkout: Path = REPO) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=checkout, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except Exception:
        return ""


def machine() -> dict[str, Any]:
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(mem_kb / 2**20, 1),
        "kernel": platform.release(),
        "loadavg_at_start": os.getloadavg(),
    }


def versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for dist in (
        "werk",
        "fastapi",
        "starlette",
        "uvicorn",
        "asyncpg",
        "pydantic",
        "uvloop",
        "httptools",
        "orjson",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


def git_state(checkout: Path = REPO) -> dict[str, Any]:
    import hashlib

    dirty = _git("status", "--porcelain", "--", "server", "pyproject.toml", checkout=checkout)
    diff = _git("diff", "HEAD", "--", "server", checkout=checkout) if dirty else ""
    return {
        "commit": _git("rev-parse", "HEAD", checkout=checkout),
        "describe": _git("log", "-1", "--format=%h %s", checkout=checkout),
        # the work tree is shared: uncommitted server changes are part of what was measured
        "server_dirty": bool(dirty),
        "server_dirty_files": dirty.splitlines(),
        "server_diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if dirty else None,
    }
