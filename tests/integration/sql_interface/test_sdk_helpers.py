"""The Python SDK's transactional_ack (psycopg) and transactional_ack_async (asyncpg): the
block's writes and the ack commit together; a lease lost meanwhile raises LeaseLost and rolls
the writes back; an exception in the block rolls back both and leaves the job leased."""

from __future__ import annotations

from typing import Any

import asyncpg
import psycopg
import pytest

import werk_client
from tests.support.helpers import sql


async def leased(api: Any, database_url: str) -> tuple[str, str]:
    await sql(database_url, "CREATE TABLE IF NOT EXISTS effects (jid text)")
    await api.http.post("/v1/jobs", json={"jobtype": "a"})
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w1"})
    (job,) = r.json()["jobs"]
    return job["jid"], job["lease"]


async def effects(database_url: str) -> list[str]:
    return [r["jid"] for r in await sql(database_url, "SELECT jid FROM effects")]


async def test_psycopg_commits_the_effect_with_the_ack(api, database_url):
    jid, lease = await leased(api, database_url)
    record = werk_client.JobRecord(jid=jid, jobtype="a", lease=lease)
    with psycopg.connect(database_url) as conn:
        with werk_client.transactional_ack(conn, record):
            conn.execute("INSERT INTO effects VALUES (%s)", (jid,))
        assert await effects(database_url) == [jid]
        assert await sql(database_url, "SELECT jid FROM werk_jobs") == []


async def test_psycopg_rolls_the_effect_back_when_the_lease_is_lost(api, database_url):
    jid, lease = await leased(api, database_url)
    r = await api.http.post(f"/v1/jobs/{jid}/ack", json={"lease": lease})  # by someone else
    assert r.status_code == 204
    with (
        psycopg.connect(database_url) as conn,
        pytest.raises(werk_client.LeaseLost),
        werk_client.transactional_ack(conn, (jid, lease)),
    ):
        conn.execute("INSERT INTO effects VALUES (%s)", (jid,))
    assert await effects(database_url) == []


async def test_psycopg_an_error_in_the_block_acks_nothing(api, database_url):
    jid, lease = await leased(api, database_url)
    with (
        psycopg.connect(database_url) as conn,
        pytest.raises(ZeroDivisionError),
        werk_client.transactional_ack(conn, (jid, lease)),
    ):
        conn.execute("INSERT INTO effects VALUES (%s)", (jid,))
        _ = 1 / 0
    assert await effects(database_url) == []
    rows = await sql(database_url, "SELECT state, lease::text FROM werk_jobs")
    assert [tuple(r) for r in rows] == [("active", lease)]


async def test_asyncpg_commits_or_rolls_back_with_the_ack(api, database_url):
    jid, lease = await leased(api, database_url)
    conn = await asyncpg.connect(database_url)
    try:
        async with werk_client.transactional_ack_async(conn, (jid, lease), result={"ok": 1}):
            await conn.execute("INSERT INTO effects VALUES ($1)", jid)
        assert await effects(database_url) == [jid]
        with pytest.raises(werk_client.LeaseLost):
            async with werk_client.transactional_ack_async(conn, (jid, lease)):
                await conn.execute("INSERT INTO effects VALUES ($1)", "again")
    finally:
        await conn.close()
    assert await effects(database_url) == [jid]
