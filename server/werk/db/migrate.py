"""Append-only migrations, applied at start-up under an advisory lock so that several nodes
starting together apply each one exactly once."""

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
    await conn.execute(sql("migration_lock"), MIGRATION_LOCK_KEY)
    try:
        await conn.execute(sql("migration_table"))
        current = await conn.fetchval(sql("migration_current"))
        if current > latest:
            raise SchemaTooNew(
                f"the database schema (version {current}) is newer than this Werk knows (up to "
                f"{latest}); upgrade Werk, or point it at another database"
            )
        for version, name, text in migrations:
            if version <= current:
                continue
            async with conn.transaction():
                await conn.execute(text)
                await conn.execute(sql("migration_record"), version, name)
            log.info("applied migration %s", name)
        return latest
    finally:
        await conn.execute(sql("migration_unlock"), MIGRATION_LOCK_KEY)
