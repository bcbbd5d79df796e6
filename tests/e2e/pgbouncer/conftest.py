"""Werk behind a real PgBouncer in transaction pooling mode (Debian's package, started here).
Without pgbouncer these tests skip loudly, naming the command that installs it."""

from __future__ import annotations

import asyncio
import secrets
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.support.database import TestDatabases
from tests.support.pgbouncer import INSTALL, PgBouncer, database_name, pgbouncer_binary
from tests.support.server import ServerProcess

# Server connections per database: fewer than one Werk process alone opens to it (its two
# pools), so clients queue for them and no client can keep one between transactions.
POOL_SIZE = 3


def _require_pgbouncer() -> None:
    if pgbouncer_binary() is None:
        message = f"PGBOUNCER TESTS SKIPPED: pgbouncer not found; install it with: {INSTALL}"
        warnings.warn(message, stacklevel=2)
        pytest.skip(message)


@pytest.fixture(scope="session")
def pgbouncer(pg_root_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgBouncer]:
    _require_pgbouncer()
    work_dir = tmp_path_factory.mktemp("pgbouncer")
    work_dir.chmod(0o755)  # readable by the user PgBouncer runs as when the suite runs as root
    bouncer = PgBouncer(pg_root_url, work_dir, pool_size=POOL_SIZE).start()
    try:
        yield bouncer
    finally:
        bouncer.stop()


def pooled_env(bouncer: PgBouncer, direct_url: str | None, database: str) -> dict[str, str]:
    """A server's settings: its database through the pooler, LISTEN on ``direct_url`` (None:
    none, long polls rely on the re-check)."""
    env = {
        "WERK_DATABASE_URL": bouncer.url(database),
        "WERK_DATABASE_POOLER": "transaction",
    }
    if direct_url is not None:
        env["WERK_DIRECT_DATABASE_URL"] = direct_url
    return env


@pytest.fixture(scope="module")
def shared_werk(
    test_databases: TestDatabases,
    pgbouncer: PgBouncer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    """The contract suite's server (see tests/e2e/conftest.py), here behind PgBouncer."""
    name = asyncio.run(test_databases.create())
    direct = test_databases.url(name)
    env = {
        **pooled_env(pgbouncer, direct, name),
        "WERK_MAINTENANCE_INTERVAL": "0.2",
        "WERK_POLL_INTERVAL": "0.2",
    }
    server = ServerProcess(direct, tmp_path_factory.mktemp("werk"), env).start()
    try:
        yield server
    finally:
        server.stop(timeout=15)
        asyncio.run(test_databases.drop(name))


@pytest.fixture
def pooled_server_factory(
    database_url: str, pgbouncer: PgBouncer, tmp_path: Path
) -> Iterator[Callable[..., ServerProcess]]:
    """``start(direct=True, env=None)``: a `werk serve` on this test's database through
    PgBouncer, listening on a direct connection unless ``direct`` is False."""
    started: list[ServerProcess] = []
    name = database_name(database_url)

    def start(*, direct: bool = True, env: dict[str, str] | None = None) -> ServerProcess:
        settings = pooled_env(pgbouncer, database_url if direct else None, name)
        settings.update(env or {})
        server = ServerProcess(database_url, tmp_path, settings).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(timeout=15)


@pytest.fixture
def empty_database(test_databases: TestDatabases) -> Iterator[str]:
    """The URL of a database with no schema at all (dropped afterwards)."""
    name = f"werk_t_{secrets.token_hex(6)}"

    async def admin(statement: str) -> None:
        conn = await asyncpg.connect(test_databases.root_url)
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}" TEMPLATE template0'))
    yield test_databases.url(name)
    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
