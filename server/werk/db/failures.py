"""The driver errors that mean "the database is away", so the layers above can answer 503 instead
of 500 without importing the driver themselves."""

from __future__ import annotations

import asyncio

import asyncpg

CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    # Raised on a connection whose protocol state broke when the server went away mid-query.
    asyncpg.InternalClientError,
)


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, CONNECTION_ERRORS)
