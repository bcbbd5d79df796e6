"""An application's login role, member of werk_app and nothing else, for the SQL interface's
tests; and a connection as it."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.database import as_user


@pytest.fixture
async def app_url(database_url: str) -> AsyncIterator[str]:
    """The test database as a fresh login role granted werk_app (roles belong to the cluster:
    each test makes its own and drops it)."""
    role = f"werk_test_app_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(database_url)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN IN ROLE werk_app")
        yield as_user(database_url, role)
    finally:
        # Its sessions first: a role with connections cannot be dropped.
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role
        )
        await admin.execute(f"DROP ROLE {role}")
        await admin.close()


@pytest.fixture
async def app_conn(app_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(app_url)
    try:
        yield conn
    finally:
        await conn.close()
