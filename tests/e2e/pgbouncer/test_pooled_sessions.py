"""What a transaction pooler does to session state, checked where Werk depends on it: the start-up
settings its timestamp codec needs survive another client's SET on the same server session, and
migrations started together on several nodes through the pooler apply each one once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from tests.e2e.pgbouncer.conftest import pooled_env
from tests.support.pgbouncer import PgBouncer, database_name
from tests.support.server import ServerProcess
from werk.db.migrate import available_migrations
from werk.db.pool import connect


async def test_werk_session_settings_survive_another_clients_set(
    pg_root_url: str, database_url: str, tmp_path: Path
) -> None:
    tmp_path.chmod(0o755)
    bouncer = PgBouncer(pg_root_url, tmp_path, pool_size=1).start()  # one shared server session
    name = database_name(database_url)
    try:
        other = await asyncpg.connect(bouncer.url(name), statement_cache_size=0)
        werk = await connect(bouncer.url(name), pooled=True)
        try:
            await other.execute("SET TimeZone = 'Asia/Tokyo'")
            await other.execute("SET DateStyle = 'SQL, DMY'")
            other_pid = await other.fetchval("SELECT pg_backend_pid()")
            row = await werk.fetchrow(
                "SELECT pg_backend_pid() AS pid, current_setting('TimeZone') AS zone, "
                "'2030-01-02 03:04:05.25+00'::timestamptz AS at"
            )
            assert row["pid"] == other_pid  # the very session the other client changed
            assert row["zone"] == "UTC"
            assert row["at"] == datetime(2030, 1, 2, 3, 4, 5, 250000, tzinfo=UTC)
            assert row["at"].utcoffset().total_seconds() == 0
        finally:
            await other.close()
            await werk.close()
    finally:
        bouncer.stop()


def test_nodes_starting_together_through_pgbouncer_migrate_once(
    empty_database: str, pgbouncer: PgBouncer, tmp_path: Path
) -> None:
    direct = empty_database
    servers = [
        ServerProcess(direct, tmp_path, pooled_env(pgbouncer, None, database_name(direct)))
        for _ in range(3)
    ]

    async def start_all() -> None:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))

    try:
        asyncio.run(start_all())  # raises if a server exits (a migration applied twice fails)

        async def applied() -> list[int]:
            conn = await asyncpg.connect(direct)
            try:
                rows = await conn.fetch("SELECT version FROM werk_schema_migrations ORDER BY 1")
                return [r["version"] for r in rows]
            finally:
                await conn.close()

        assert asyncio.run(applied()) == [v for v, _, _ in available_migrations()]
    finally:
        for server in servers:
            server.stop(timeout=15)
