"""The connection pool. JSON columns are decoded with orjson once, here, and UUIDs (leases) travel
as text: the API speaks them as strings, and asyncpg's UUID objects cost a Python-level str() per
job on every fetch.

Timestamps travel as text too, in ISO format at UTC (the sessions' DateStyle and TimeZone are
set for it), parsed by ``datetime.fromisoformat``: the same aware datetimes as asyncpg's binary
decoder gives, at a quarter of its cost (a row of four timestamps: 5.1 against 1.2 us of client
CPU, and PostgreSQL's text output costs it 0.5 us more). A claimed job carries four. Values
outside Python's datetime (year 10000 and later, 'infinity') fail to decode either way; Werk
writes none."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import orjson

# What the timestamp codec reads and writes (see above); a database's own defaults may differ.
SESSION = {"application_name": "werk", "DateStyle": "ISO", "TimeZone": "UTC"}


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(
            typename, schema="pg_catalog", encoder=_dumps, decoder=orjson.loads, format="text"
        )
    await conn.set_type_codec("uuid", schema="pg_catalog", encoder=str, decoder=str, format="text")
    await conn.set_type_codec(
        "timestamptz",
        schema="pg_catalog",
        encoder=datetime.isoformat,
        decoder=datetime.fromisoformat,
        format="text",
    )


async def _no_reset(_conn: asyncpg.Connection) -> None:
    """Werk keeps no session state on pooled connections (no LISTEN, advisory locks, cursors or
    SET), so the default reset query (a round trip and four statements on every release) buys
    nothing. asyncpg still rolls back a transaction left open, before this is called."""


async def create_pool(
    dsn: str, *, min_size: int, max_size: int, plan_once: bool = False
) -> asyncpg.Pool:
    """``plan_once``: prepared statements use one generic plan (plan_cache_mode
    force_generic_plan) instead of PostgreSQL re-planning each call, which by default it keeps
    doing when a plan for the actual array sizes looks cheaper. Only for statements whose best
    plan does not depend on their parameters (tests/test_claim_plan.py checks the claim's)."""
    settings = dict(SESSION)
    if plan_once:
        settings["plan_cache_mode"] = "force_generic_plan"
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_no_reset,
        command_timeout=60,
        # Statements are prepared once per connection and reused; the hot paths are a handful.
        statement_cache_size=256,
        server_settings=settings,
    )
    assert pool is not None
    return pool


async def connect(dsn: str, application_name: str = "werk") -> asyncpg.Connection:
    """A single connection outside the pool (migrations, LISTEN)."""
    conn = await asyncpg.connect(
        dsn, server_settings={**SESSION, "application_name": application_name}
    )
    await _init_connection(conn)
    return conn
