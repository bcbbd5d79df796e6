"""Append-only migrations, applied at start-up so that several nodes starting together apply each
one exactly once: each in its own transaction, under a transaction-level advisory lock taken
before the schema's version is read. A transaction-level lock, not a session one, so that it
also holds through a transaction pooler (PgBouncer), where consecutive statements outside a
transaction may run on different server sessions."""

from __future__ import annotations

import logging
from importlib import resources

import asyncpg

from werk.db.sql import sql
from werk.errors import SchemaTooNew

log = logging.getLogger(__name__)

# An arbitrary constant shared by every Werk node ("werk" in ASCII).
MIGRATION_LOCK_KEY = 0x7765726B


def available_migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration shipped with this code, in order."""
    found = []
    for entry in resources.files("werk.db").joinpath("migrations").iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text()))
    return sorted(found)


async def migrate(conn: asyncpg.Connection) -> int:
    """Bring the schema up to date; returns the resulting version."""
    migrations = available_migrations()
    latest = migrations[-1][0]
    while True:
        async with conn.transaction():
            await conn.execute(sql("migration_lock"), MIGRATION_LOCK_KEY)
            await conn.execute(sql("migration_table"))
            current = await conn.fetchval(sql("migration_current"))
            if current > latest:
                raise SchemaTooNew(
                    f"the database schema (version {current}) is newer than this Werk knows (up "
                    f"to {latest}); upgrade Werk, or point it at another database"
                )
            pending = [m for m in migrations if m[0] > current]
            if not pending:
                return latest
            version, name, text = pending[0]
            await conn.execute(text)
            await conn.execute(sql("migration_record"), version, name)
        log.info("applied migration %s", name)
