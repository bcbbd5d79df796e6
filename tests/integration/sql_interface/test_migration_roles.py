"""Migrating as a user without CREATEROLE, on a PostgreSQL of its own (roles belong to the whole
cluster, so werk_app must not exist yet): the migration warns and goes on, the interface serves
its owner only, and the statements the README gives an administrator make werk_app work."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
import pytest

from tests.support.database import EmbeddedPostgres, as_user, with_database
from werk.db.migrate import migrate

ROOT = Path(__file__).resolve().parents[3]


def administrator_statements() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Enqueue and complete inside your transaction", 1)[1]
    found = re.search(r"an administrator then runs.*?```sql\n(.*?)```", section, flags=re.S)
    assert found, "the README lost the administrator's statements"
    return found[1]


async def test_a_migrating_user_without_createrole_is_warned_and_an_admin_finishes():
    pg = EmbeddedPostgres()
    root = pg.start()
    try:
        admin = await asyncpg.connect(root)
        await admin.execute("CREATE ROLE werk_owner LOGIN")
        await admin.execute("CREATE ROLE shop_app LOGIN")
        await admin.execute("CREATE DATABASE werk_owned OWNER werk_owner")
        await admin.close()
        database = with_database(root, "werk_owned")
        owner = await asyncpg.connect(as_user(database, "werk_owner"))
        notices: list[str] = []
        owner.add_log_listener(lambda _c, message: notices.append(str(message)))
        await migrate(owner)
        assert any("werk_app does not exist" in n and "CREATEROLE" in n for n in notices)
        assert await owner.fetchval("SELECT werk.push('a', '[]')")  # its owner may call it
        app = await asyncpg.connect(as_user(database, "shop_app"))
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await app.fetchval("SELECT werk.push('a', '[]')")
        await app.close()

        admin = await asyncpg.connect(database)
        await admin.execute(administrator_statements())
        await admin.execute("GRANT werk_app TO shop_app")
        await admin.close()
        app = await asyncpg.connect(as_user(database, "shop_app"))
        assert await app.fetchval("SELECT werk.push('a', '[]')")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await app.fetch("SELECT * FROM werk_jobs")
        await app.close()
        assert await owner.fetchval("SELECT count(*) FROM werk_jobs") == 2
        await owner.close()
    finally:
        pg.stop()
