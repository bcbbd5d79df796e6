"""The connection pool. JSON columns are decoded with orjson once, here, and UUIDs (leases) travel
as text: the API speaks them as strings, and asyncpg's UUID objects cost a Python-level str() per
job on every fetch.

Timestamps travel as text too, in ISO format at UTC (the sessions' DateStyle and TimeZone are
set for it), parsed by ``datetime.fromisoformat``: the same aware datetimes as asyncpg's binary
decoder gives, for a fraction of the client's CPU (PostgreSQL's text output costs it a little
more). A claimed job carries four.

A stored time beyond Python's datetime (BC, year 10000 and later, 'infinity': Werk writes none,
see werk.domain.times, but SQL by hand or another program may) is read as the nearest bound, with
an error logged. A row must never fail to decode: a claim has committed by the time its rows are
decoded, and a row that failed there would leave its jobs, and every job claimed with them,
leased to a worker that never received them."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import asyncpg
import orjson

from werk.domain.times import TIME_MAX, TIME_MIN

log = logging.getLogger(__name__)

# What the timestamp codec reads and writes (see above); a database's own defaults may differ.
SESSION = {"application_name": "werk", "DateStyle": "ISO", "TimeZone": "UTC"}
# On connections of their own (not through a pooler, which refuses start-up parameters it does
# not track): no JIT. PostgreSQL compiles a statement whose estimated cost passes
# jit_above_cost, on every execution; Werk's statements read few rows of large tables, so their
# estimates pass it where a queue or the kept jobs are large, and compiling then takes longer
# than running (an operator's search or bulk action over a large queue).
DIRECT_SESSION = {"jit": "off"}


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _timestamp(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return _beyond_datetime(text)


def _beyond_datetime(text: str) -> datetime:
    bound = TIME_MIN if text.endswith(" BC") or text == "-infinity" else TIME_MAX
    log.error(
        "a stored time (%s) lies outside what Werk can read; it is read as %s. Werk accepts no "
        "such time, so the row was written by other means: correct it",
        text,
        bound.isoformat(),
    )
    return bound


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
        decoder=_timestamp,
        format="text",
    )


async def _no_reset(_conn: asyncpg.Connection) -> None:
    """Werk keeps no session state on pooled connections (no LISTEN, advisory locks, cursors or
    SET), so the default reset query (a round trip and four statements on every release) buys
    nothing. asyncpg still rolls back a transaction left open, before this is called."""


# Statements are prepared once per connection and reused; the hot paths are a handful.
STATEMENT_CACHE = 256


def _statement_cache(pooled: bool) -> int:
    """``pooled``: the connection leads to a transaction pooler (PgBouncer pool_mode
    transaction), which runs each transaction on whichever server connection is free: a named
    prepared statement made on one would be missing on the next. asyncpg with no statement
    cache uses unnamed statements, parsed again in the same message flight as their execution
    (asyncpg's documented set-up for PgBouncer)."""
    return 0 if pooled else STATEMENT_CACHE


async def create_pool(
    dsn: str, *, min_size: int, max_size: int, plan_once: bool = False, pooled: bool = False
) -> asyncpg.Pool:
    """``plan_once``: prepared statements use one generic plan (plan_cache_mode
    force_generic_plan) instead of PostgreSQL re-planning each call, which by default it keeps
    doing when a plan for the actual array sizes looks cheaper. Only for statements whose best
    plan does not depend on their parameters (tests/integration/test_claim_plan.py checks the
    claim's). Not through a pooler (``pooled``): a session setting there would reach whichever
    client next gets the server connection, and PgBouncer refuses start-up parameters it does
    not track; every statement is parsed and planned anew there anyway, and the custom plans of
    the job traffic's statements are checked as their generic ones are."""
    settings = dict(SESSION)
    if not pooled:
        settings.update(DIRECT_SESSION)
        if plan_once:
            settings["plan_cache_mode"] = "force_generic_plan"
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_no_reset,
        command_timeout=60,
        statement_cache_size=_statement_cache(pooled),
        server_settings=settings,
    )
    assert pool is not None
    return pool


async def connect(
    dsn: str, application_name: str = "werk", *, pooled: bool = False
) -> asyncpg.Connection:
    """A single connection outside the pool (migrations, LISTEN)."""
    conn = await asyncpg.connect(
        dsn,
        statement_cache_size=_statement_cache(pooled),
        server_settings={
            **SESSION,
            **({} if pooled else DIRECT_SESSION),
            "application_name": application_name,
        },
    )
    await _init_connection(conn)
    return conn
