"""Every SDK's contract worker replays the worker scenarios; the parity table in
client/README.md must be the one this run produces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.clients.toolchains import go_env, node_ready
from tests.support.server import ServerProcess

from .parity import committed, render, write
from .worker_scenarios import SDKS, Program, programs, replay, scenarios

OUTCOMES: dict[str, dict[str, str | None]] = {sdk: {} for sdk in SDKS}


@pytest.fixture(scope="module")
def contract_workers() -> dict[str, Program]:
    return programs(go_env, node_ready)


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("scenario", scenarios(), ids=lambda s: s["name"])
def test_worker_scenario(
    sdk: str,
    scenario: dict,
    contract_workers: dict[str, Program],
    shared_werk: ServerProcess,
    tmp_path: Path,
) -> None:
    problem = replay(contract_workers[sdk], shared_werk.url, scenario, tmp_path)
    OUTCOMES[sdk][scenario["name"]] = problem
    assert problem is None, f"{sdk}: {problem}"


def test_parity_table_is_current() -> None:
    if any(len(OUTCOMES[sdk]) != len(scenarios()) for sdk in SDKS):
        pytest.skip("run with every worker scenario (the whole module) to check the table")
    if os.environ.get("UPDATE_PARITY_TABLE"):
        write(render(OUTCOMES))
    assert render(OUTCOMES) == committed(), (
        "client/README.md's parity table is stale: "
        "python -m tests.e2e.contract.parity --url <server> --write"
    )
