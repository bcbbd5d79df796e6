"""The same contract scenarios replayed through the Python SDK (werk_client.Client), as the
TypeScript and Go suites replay them through theirs."""

from __future__ import annotations

import dataclasses
import json
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.contract.replay import lookup, mismatches, scenario_files, substitute
from tests.support.server import ServerProcess
from werk_client import Client, WerkError


def wire(value: Any) -> Any:
    """The SDK's records as the JSON they came from (datetimes back to RFC 3339)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [wire(v) for v in value]
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items()}
    return value


def perform(client: Client, op: str, p: dict[str, Any]) -> Any:
    rest = {k: v for k, v in p.items() if k not in ("jid", "lease")}
    if op == "push":
        return client.push(**p)
    if op == "push_many":
        return client.push_many(p["jobs"])
    if op == "get":
        return client.get(p["jid"])
    if op == "info":
        return client.info()
    if op == "fetch":
        return {"jobs": client.fetch(p["queues"], wid=p["wid"], count=p["count"], wait=p["wait"])}
    if op == "ack":
        client.ack(p["jid"], p["lease"])
        return None
    if op == "ack_many":
        return client.ack_many([(a["jid"], a["lease"]) for a in p["acks"]])
    if op == "fail":
        return client.fail(p["jid"], p["lease"], **rest)
    if op == "extend":
        return client.extend(p["jid"], p["lease"], **rest)
    if op == "beat":
        return {"state": client.beat(**p)}
    raise AssertionError(f"unknown op {op}")


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario_through_the_python_sdk(shared_werk: ServerProcess, path: Path) -> None:
    scenario = json.loads(path.read_text())
    variables: dict[str, Any] = {"run": secrets.token_hex(4)}
    with Client(shared_werk.url) as client:
        for number, step in enumerate(scenario["steps"]):
            where = f"{scenario['name']} step {number} ({step['op']})"
            params = substitute(step.get("params", {}), variables)
            expect = substitute(step["expect"], variables)
            try:
                result = wire(perform(client, step["op"], params))
            except WerkError as error:
                assert "error" in expect, f"{where}: {error}"
                got = {"status": error.status, "code": error.code, "errors": error.errors}
                assert not mismatches(expect["error"], got), f"{where}: {error}"
                continue
            assert "error" not in expect, f"{where}: expected {expect['error']}, got {result}"
            errs = mismatches(expect["result"], result)
            assert not errs, f"{where}: {errs}"
            for name, dotted in step.get("save", {}).items():
                variables[name] = lookup(result, dotted)
