"""Exactly-once completion: a job's side effect and its ack in one transaction of the database
Werk shares with the application.

    job = client.fetch(["default"], wid="w1")[0]
    with werk_client.transactional_ack(conn, job):        # conn: a psycopg 3 connection
        conn.execute("INSERT INTO invoices ...", ...)

On leaving the block the helper calls ``werk.ack(jid, lease, result)`` in the same transaction.
If the lease is no longer the job's (it expired and the job went to another worker), the ack
returns false and the helper raises ``LeaseLost`` inside the transaction, so the side effect is
rolled back with it; an exception from the block rolls back both and the job stays leased (fail
it, or let the lease expire). The connection's role needs ``werk_app`` (see the README).

Drivers: psycopg 3 (``transactional_ack``, sync) and asyncpg (``transactional_ack_async``). Both
open a transaction (a savepoint when one is open already: a lost lease then rolls back to it).
With SQLAlchemy, pass ``session.connection().connection.driver_connection`` (psycopg), or call
``SELECT werk.ack(:jid, :lease)`` yourself and raise when it returns false.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from .errors import LeaseLost

__all__ = ["transactional_ack", "transactional_ack_async"]


def _jid_lease(job: Any) -> tuple[str, str]:
    """``job``: a fetched ``JobRecord``, a handler's ``Job``, or a ``(jid, lease)`` pair."""
    if isinstance(job, tuple):
        jid, lease = job
        return str(jid), str(lease)
    record = getattr(job, "record", job)
    if not getattr(record, "lease", None):
        raise ValueError(f"job {record.jid!r} carries no lease: pass a fetched job")
    return record.jid, record.lease


def _lost(jid: str) -> LeaseLost:
    return LeaseLost(
        f"the lease on job {jid!r} is no longer current (it expired, or the job was settled); "
        "the transaction was rolled back",
        code="lease_lost",
    )


@contextmanager
def transactional_ack(conn: Any, job: Any, *, result: Any = None) -> Iterator[None]:
    """Run the block and ack ``job`` in one transaction of ``conn`` (psycopg 3). ``result`` is
    stored with a job pushed with ``keep_result_for``."""
    jid, lease = _jid_lease(job)
    encoded = None if result is None else json.dumps(result)
    with conn.transaction():
        yield
        row = conn.execute("SELECT werk.ack(%s, %s, %s::jsonb)", (jid, lease, encoded)).fetchone()
        if not row[0]:
            raise _lost(jid)


@asynccontextmanager
async def transactional_ack_async(
    conn: Any, job: Any, *, result: Any = None
) -> AsyncIterator[None]:
    """``transactional_ack`` for an asyncpg connection: ``async with``."""
    jid, lease = _jid_lease(job)
    encoded = None if result is None else json.dumps(result)
    async with conn.transaction():
        yield
        if not await conn.fetchval("SELECT werk.ack($1, $2, $3::jsonb)", jid, lease, encoded):
            raise _lost(jid)
