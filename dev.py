#!/usr/bin/env python3
"""Bootstrap and run Werk from a fresh clone with nothing but Python 3.11+.

    python3 dev.py serve [werk serve flags]   # start the server (embedded PostgreSQL by default)
    python3 dev.py test  [pytest args]        # run the whole test suite

Both create ./.venv on first use and install the pinned dependencies from requirements.lock
(again whenever the lock or a pyproject changes).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".werk-installed"
INPUTS = [
    ROOT / "requirements.lock",
    ROOT / "pyproject.toml",
    ROOT / "client/python/pyproject.toml",
]
LOCAL_PACKAGES = [ROOT, ROOT / "client/python"]


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in INPUTS:
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_environment() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this file runs before any check
        sys.exit(f"Werk needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        print("dev.py: creating .venv", file=sys.stderr)
        venv.create(VENV, with_pip=True)
    if STAMP.exists() and STAMP.read_text() == _fingerprint():
        return
    print("dev.py: installing pinned dependencies (requirements.lock)", file=sys.stderr)
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "-r", str(ROOT / "requirements.lock")], check=True)
    editable = [
        a for p in LOCAL_PACKAGES if (p / "pyproject.toml").exists() for a in ("-e", str(p))
    ]
    subprocess.run([*pip, "--no-deps", *editable], check=True)
    STAMP.write_text(_fingerprint())


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in {"serve", "test", "setup"}:
        sys.exit(__doc__)
    command, rest = sys.argv[1], sys.argv[2:]
    ensure_environment()
    os.chdir(ROOT)
    if command == "serve":
        os.execv(str(BIN / "werk"), [str(BIN / "werk"), "serve", *rest])
    elif command == "test":
        os.execv(str(PYTHON), [str(PYTHON), "-m", "pytest", *rest])


if __name__ == "__main__":
    main()
