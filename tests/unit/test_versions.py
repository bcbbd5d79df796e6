"""One version for every package of a release. It is set in server/werk/__init__.py (the server's
pyproject reads it from there); each client states it where its own toolchain reads it, and must
state the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import werk

ROOT = Path(__file__).resolve().parents[2]


def stated(path: str, pattern: str) -> str:
    found = re.findall(pattern, (ROOT / path).read_text(), flags=re.M)
    assert len(found) == 1, f"{path}: expected one version matching {pattern!r}, found {found}"
    return str(found[0])


def package_lock_version() -> str:
    lock = json.loads((ROOT / "client/typescript/package-lock.json").read_text())
    assert lock["version"] == lock["packages"][""]["version"]
    return str(lock["version"])


CLIENT_VERSIONS = {
    "client/python/src/werk_client/version.py": lambda: stated(
        "client/python/src/werk_client/version.py", r'^__version__ = "([^"]+)"$'
    ),
    "client/typescript/package.json": lambda: json.loads(
        (ROOT / "client/typescript/package.json").read_text()
    )["version"],
    "client/typescript/package-lock.json": package_lock_version,
    "client/typescript/src/client.ts": lambda: stated(
        "client/typescript/src/client.ts", r'^export const VERSION = "([^"]+)";$'
    ),
    "client/go/client.go": lambda: stated("client/go/client.go", r'^const Version = "([^"]+)"$'),
}


def test_the_server_version_is_a_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc)?\d*", werk.__version__), werk.__version__


@pytest.mark.parametrize("path", sorted(CLIENT_VERSIONS))
def test_each_client_states_the_server_version(path):
    assert CLIENT_VERSIONS[path]() == werk.__version__, (
        f"{path} states another version than server/werk/__init__.py; set the same in both"
    )


@pytest.mark.parametrize(
    ("pyproject", "attr"),
    [
        ("pyproject.toml", "werk.__version__"),
        ("client/python/pyproject.toml", "werk_client.version.__version__"),
    ],
)
def test_python_packages_read_the_version_from_their_code(pyproject, attr):
    import tomllib

    project = tomllib.loads((ROOT / pyproject).read_text())
    assert project["project"]["dynamic"] == ["version"]
    assert "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": attr}
