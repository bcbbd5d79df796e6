"""The client contract (client/contract/scenarios/*.json) replayed over raw HTTP against a real
server: the wire behaviour every SDK's own replay must also see."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.contract.replay import mismatches, replay, scenario_files
from tests.support.server import ServerProcess


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario(shared_werk: ServerProcess, path: Path) -> None:
    scenario = json.loads(path.read_text())
    with httpx.Client(base_url=shared_werk.url, timeout=30) as http:
        replay(http, scenario)


def test_there_are_scenarios_for_every_operation() -> None:
    ops = {s["op"] for p in scenario_files() for s in json.loads(p.read_text())["steps"]}
    assert ops == {
        "push", "push_many", "get", "info", "fetch", "ack", "ack_many", "fail", "extend", "beat"
    }  # fmt: skip


def test_the_matcher_rejects_what_it_should() -> None:
    assert mismatches({"a": "$integer"}, {"a": True})
    assert mismatches({"a": 1}, {"b": 1})
    assert mismatches([1], [1, 2])
    assert mismatches("$datetime", "2030-01-01T09:00:00")
    assert not mismatches("$datetime?", None)
    assert not mismatches({"a": [{"b": "$string"}]}, {"a": [{"b": "x", "c": 1}], "d": 2})
