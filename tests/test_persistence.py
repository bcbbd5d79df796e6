"""Jobs survive restarts (external database and the embedded one); migrations are safe to run
concurrently and refuse a schema newer than the code."""

from __future__ import annotations

import asyncio
import sys

import httpx
import pytest

from tests.support.helpers import sql
from tests.support.server import ServerProcess, clean_env
from werk.app import prepare_database
from werk.db.migrate import available_migrations
from werk.errors import SchemaTooNew


def test_restart_keeps_every_job(werk_server_factory):
    first = werk_server_factory()
    jobs = [{"jobtype": "keep", "jid": f"keep-{i:04d}"} for i in range(50)]
    assert httpx.post(first.url + "/v1/jobs/batch", json={"jobs": jobs}).status_code == 201
    first.kill()
    second = werk_server_factory()
    info = httpx.get(second.url + "/v1/info").json()
    assert info["states"] == {"available": 50}


def test_embedded_postgres_keeps_jobs_across_restarts(tmp_path):
    """The README's serve command with no database URL: embedded PostgreSQL in a data dir."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    tmp_path.chmod(0o755)

    def start() -> ServerProcess:
        server = ServerProcess("", tmp_path, env={"WERK_DATA_DIR": str(data_dir)})
        server._env = clean_env({k: v for k, v in server._env.items() if k != "WERK_DATABASE_URL"})
        return server.start(timeout=90)

    server = start()
    try:
        r = httpx.post(server.url + "/v1/jobs", json={"jobtype": "x", "jid": "embedded-1"})
        assert r.status_code == 201
    finally:
        assert server.stop() == 0
    server = start()
    try:
        assert httpx.get(server.url + "/v1/jobs/embedded-1").json()["state"] == "available"
    finally:
        server.stop()
    assert (data_dir / "pgdata" / "PG_VERSION").exists()


async def test_concurrent_migrations_apply_once(test_databases):
    name = f"werk_fresh_{id(test_databases) % 10000}"
    await test_databases.drop(name)
    await sql(test_databases.root_url, f'CREATE DATABASE "{name}"')
    url = test_databases.url(name)
    try:
        await asyncio.gather(*(prepare_database(url) for _ in range(4)))
        rows = await sql(url, "SELECT version FROM werk_schema_migrations ORDER BY version")
        assert [r["version"] for r in rows] == [v for v, _, _ in available_migrations()]
    finally:
        await test_databases.drop(name)


async def test_schema_newer_than_the_code_is_refused(database_url, tmp_path):
    await sql(database_url, "INSERT INTO werk_schema_migrations (version, name) VALUES (9999, 'x')")
    with pytest.raises(SchemaTooNew, match="9999"):
        await prepare_database(database_url)
    env = clean_env({"WERK_DATABASE_URL": database_url, "WERK_PORT": "0"})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "werk.cli",
        "serve",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0
    assert b"newer" in err and b"9999" in err
