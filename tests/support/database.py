"""A real PostgreSQL for the suite: WERK_TEST_DATABASE_URL when set, else an embedded one started
for this run. Each test gets a fresh database cloned from a migrated template."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from werk.app import prepare_database


def as_user(url: str, user: str) -> str:
    """``url`` logging in as ``user`` (no password: the test servers trust local logins)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


class TestDatabases:
    # Not a test class: the name only says what it makes (pytest would try to collect it).
    __test__ = False

    def __init__(self, root_url: str) -> None:
        self.root_url = root_url
        self.template = f"werk_tmpl_{secrets.token_hex(4)}"

    async def _admin(self, sql: str) -> None:
        conn = await asyncpg.connect(self.root_url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def create_template(self) -> None:
        await self._admin(f'CREATE DATABASE "{self.template}"')
        await prepare_database(with_database(self.root_url, self.template))
        # A template must have no connections when it is cloned.
        await self._admin(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{self.template}' AND pid <> pg_backend_pid()"
        )

    async def create(self) -> str:
        name = f"werk_t_{secrets.token_hex(6)}"
        await self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        return name

    async def create_empty(self) -> str:
        """A database without Werk's schema, for a server to migrate at its start."""
        name = f"werk_t_{secrets.token_hex(6)}"
        await self._admin(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    async def drop(self, name: str) -> None:
        await self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def url(self, name: str) -> str:
        return with_database(self.root_url, name)


class EmbeddedPostgres:
    """The same embedded server `werk serve` uses, in a throwaway directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="werk-test-pg-"))
        self.dir.chmod(0o755)
        self.server: Any = None

    def start(self) -> str:
        from werk.embedded import embedded_url, start_embedded

        self.server = start_embedded(self.dir)
        return embedded_url(self.server)

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


class RestartablePostgres(EmbeddedPostgres):
    """A private embedded PostgreSQL that a test may stop and start again (outage scenarios)."""

    def _pg_ctl(self, *args: str) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(list(args), pgdata=self.dir / "pgdata", user=self.server.system_user, timeout=60)

    def halt(self) -> None:
        self._pg_ctl("-w", "-m", "fast", "stop")

    def resume(self) -> None:
        socket_dir = self.server.get_postmaster_info().socket_dir
        self._pg_ctl(
            "-w",
            "-o",
            '-h ""',
            "-o",
            f"-k {socket_dir}",
            "-l",
            str(self.dir / "pgdata" / "log"),
            "start",
        )
