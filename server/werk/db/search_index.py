"""Typed wrappers for the search index over available jobs (search_index_*.sql) and the session
lock that keeps its builders apart. Each but ``state`` takes a single connection of its own: the
build runs outside any transaction and the lock belongs to the session that took it."""

from __future__ import annotations

import asyncpg

from werk.db.queries import Executor
from werk.db.sql import sql

# "werk" + 2: the lock held by the one node building the search index over available jobs.
SEARCH_INDEX_LOCK_KEY = 0x7765726D


async def try_lock(conn: asyncpg.Connection) -> bool:
    """Take the builders' lock unless another session holds it."""
    return bool(await conn.fetchval(sql("lock_try"), SEARCH_INDEX_LOCK_KEY))


async def unlock(conn: asyncpg.Connection) -> None:
    await conn.execute(sql("lock_release"), SEARCH_INDEX_LOCK_KEY)


async def state(db: Executor) -> bool | None:
    """None: no index; False: one being built, or left invalid; True: searches read it."""
    valid: bool | None = await db.fetchval(sql("search_index_state"))
    return valid


async def create(conn: asyncpg.Connection) -> None:
    await conn.execute(sql("search_index_create"))


async def drop(conn: asyncpg.Connection) -> None:
    await conn.execute(sql("search_index_drop"))
