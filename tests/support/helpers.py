"""Small conveniences shared by the tests."""

from __future__ import annotations

from typing import Any

import asyncpg


async def sql(database_url: str, query: str, *args: Any) -> list[Any]:
    """Run one statement against the test's database (for arranging and checking state)."""
    conn = await asyncpg.connect(database_url)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def count_jobs(database_url: str) -> int:
    rows = await sql(database_url, "SELECT count(*) AS n FROM werk_jobs")
    return int(rows[0]["n"])
