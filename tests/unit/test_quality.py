"""The house rules, checked on every run: the committed OpenAPI document matches the code, and
lint, formatting, types and layering are clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from werk.openapi import render

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_committed_openapi_matches_the_code():
    committed = (ROOT / "openapi" / "openapi.json").read_text()
    assert committed == render(), (
        "openapi/openapi.json is stale: run `make openapi` (werk openapi --output "
        "openapi/openapi.json) and commit it"
    )


def test_operation_ids_are_set_on_every_operation():
    import json

    doc = json.loads(render())
    missing = [
        f"{method.upper()} {path}"
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if "operationId" not in op
    ]
    assert missing == []


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "server", "tests", "dev.py"],
        ["ruff", "format", "--check", "server", "tests", "dev.py"],
        ["mypy"],
        ["lint-imports"],
    ],
    ids=["ruff-check", "ruff-format", "mypy", "import-layers"],
)
def test_tool_is_clean(command):
    result = subprocess.run(
        [str(BIN / command[0]), *command[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
