"""Fixtures: a real PostgreSQL (never a mock), a fresh database per test, the app in-process
with a manual clock, and real server processes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.database import EmbeddedPostgres, TestDatabases
from tests.support.server import ServerProcess
from werk.app import create_app
from werk.config import Settings
from werk.db import search_index
from werk.db.pool import connect
from werk.domain.clock import ManualClock
from werk.services.container import Services

# Read once, before the autouse fixture below hides every WERK_* variable from the tests.
_EXTERNAL_URL = os.environ.get("WERK_TEST_DATABASE_URL")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("WERK_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def pg_root_url() -> Iterator[str]:
    if _EXTERNAL_URL:
        yield _EXTERNAL_URL
        return
    embedded = EmbeddedPostgres()
    try:
        yield embedded.start()
    finally:
        embedded.stop()


@pytest.fixture(scope="session")
def test_databases(pg_root_url: str) -> Iterator[TestDatabases]:
    dbs = TestDatabases(pg_root_url)
    asyncio.run(dbs.create_template())
    try:
        yield dbs
    finally:  # on WERK_TEST_DATABASE_URL's server, a run leaves no database behind
        asyncio.run(dbs.drop(dbs.template))


@pytest.fixture
async def database_url(test_databases: TestDatabases) -> AsyncIterator[str]:
    name = await test_databases.create()
    try:
        yield test_databases.url(name)
    finally:
        await test_databases.drop(name)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_settings(database_url: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        # FWP off unless a test asks for it: 7419 may be taken (by another test's server).
        # werk.test: the host name the in-process client sends (see make_api).
        values: dict[str, Any] = {
            "database_url": database_url,
            "poll_interval": 0.2,
            "faktory_port": 0,
            "allowed_hosts": ["werk.test"],
        }
        values.update(overrides)
        return Settings(**values)

    return make


class InProcess:
    """The app under a manual clock, with maintenance driven by the test."""

    def __init__(self, http: httpx.AsyncClient, services: Services, clock: ManualClock) -> None:
        self.http = http
        self.services = services
        self.clock = clock

    async def maintain(self) -> dict[str, int]:
        return await self.services.maintenance.run_once()


@pytest.fixture
async def make_api(
    make_settings: Callable[..., Settings], clock: ManualClock
) -> AsyncIterator[Callable[..., Any]]:
    stack: list[Any] = []

    async def make(**overrides: Any) -> InProcess:
        app = create_app(make_settings(**overrides), clock=clock, background=False)
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        stack.append(lifespan)
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://werk.test"
        )
        stack.append(http)
        return InProcess(http, app.state.services, clock)

    yield make
    for item in reversed(stack):
        await item.__aexit__(None, None, None)


@pytest.fixture
async def api(make_api: Callable[..., Any]) -> InProcess:
    result: InProcess = await make_api()
    return result


@pytest.fixture(params=["walked", "indexed"])
async def search_api(
    request: pytest.FixtureRequest, make_api: Callable[..., Any], database_url: str
) -> InProcess:
    """The app without and with the search index over available jobs (WERK_SEARCH_AVAILABLE,
    once its background build is done): a search answers the same either way."""
    if request.param == "walked":
        result: InProcess = await make_api()
        return result
    result = await make_api(search_available=True)
    conn = await connect(database_url)
    try:
        for _ in range(200):
            if await search_index.state(conn):
                return result
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError("the search index over available jobs was not built")


@pytest.fixture
def werk_server_factory(
    database_url: str, tmp_path: Path
) -> Iterator[Callable[..., ServerProcess]]:
    started: list[ServerProcess] = []

    def start(env: dict[str, str] | None = None) -> ServerProcess:
        server = ServerProcess(database_url, tmp_path, env).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(timeout=15)


@pytest.fixture
def werk_server(werk_server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return werk_server_factory()
