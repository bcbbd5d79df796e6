"""The session settings of Werk's own connections to PostgreSQL (not through a pooler; the
pooled ones are checked through a real PgBouncer in tests/e2e/pgbouncer)."""

from __future__ import annotations

from werk.db.pool import connect, create_pool


async def test_direct_connections_do_not_jit(database_url: str) -> None:
    # A statement over a large table would be compiled on each execution otherwise: the
    # estimate of a search or a claim over a backlog passes jit_above_cost.
    pool = await create_pool(database_url, min_size=1, max_size=1, plan_once=True)
    conn = await connect(database_url)
    try:
        assert await pool.fetchval("SHOW jit") == "off"
        assert await pool.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
        assert await conn.fetchval("SHOW jit") == "off"
        assert await conn.fetchval("SHOW TimeZone") == "UTC"
    finally:
        await conn.close()
        await pool.close()
