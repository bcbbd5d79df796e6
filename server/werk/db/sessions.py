"""Dashboard sessions and the key that signs their cookies: one typed wrapper per SQL file."""

from __future__ import annotations

from datetime import datetime

from werk.db.queries import Executor
from werk.db.sql import sql


async def session_secret(db: Executor, offer: bytes) -> bytes:
    """The installation's cookie key; ``offer`` becomes it when there is none yet. Two statements,
    each in its own snapshot: when several nodes offer at once, the losers' inserts wait for the
    winner's and do nothing, and the read that follows sees what the winner committed."""
    await db.execute(sql("session_secret_offer"), offer)
    secret: bytes = await db.fetchval(sql("session_secret"))
    return secret


async def create_session(
    db: Executor, now: datetime | None, sid: bytes, holder: str, max_age: float
) -> None:
    await db.execute(sql("session_create"), sid, holder, max_age, now)


async def session_live(
    db: Executor, now: datetime | None, sid: bytes, holder: str, max_age: float
) -> bool:
    live: bool = await db.fetchval(sql("session_live"), sid, holder, max_age, now)
    return live


async def end_session(db: Executor, sid: bytes) -> None:
    await db.execute(sql("session_end"), sid)


async def prune_sessions(db: Executor, now: datetime | None) -> int:
    status: str = await db.execute(sql("session_prune"), now)
    return int(status.split()[-1])
