"""Classifies driver errors, so the layers above can answer 503 instead of 500 while the
database is away, without importing the driver themselves."""

from __future__ import annotations

import asyncio

import asyncpg


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(
        exc,
        OSError
        | asyncio.TimeoutError
        | asyncpg.PostgresConnectionError
        | asyncpg.InterfaceError
        | asyncpg.CannotConnectNowError
        | asyncpg.AdminShutdownError
        | asyncpg.CrashShutdownError,
    )
