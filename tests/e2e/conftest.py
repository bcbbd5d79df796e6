"""Fixtures of the end-to-end tests. One real server per test module for the contract, client
and SDK contract suites: scenarios and SDK tests name their queues and jids per run, so they
share it safely (starting a server per test would cost most of the suite's time)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.support.database import TestDatabases
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def shared_werk(
    test_databases: TestDatabases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    name = asyncio.run(test_databases.create())
    server = ServerProcess(
        test_databases.url(name),
        tmp_path_factory.mktemp("werk"),
        {"WERK_MAINTENANCE_INTERVAL": "0.2", "WERK_POLL_INTERVAL": "0.2"},
    ).start()
    try:
        yield server
    finally:
        server.stop(timeout=15)
        asyncio.run(test_databases.drop(name))
