"""Dashboard sessions: signed by a key nobody can read from the configuration, expiring when the
server says so, and ended everywhere by logging out (issue 28, defect 3)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import InProcess
from tests.integration.web.test_dashboard import ADMIN, SAME_ORIGIN, TOKENS, login
from tests.support.helpers import sql
from tests.support.server import ServerProcess
from werk.db import sessions as db_sessions

TOKENS_ENV = '[{"name":"ops.team","token":"' + ADMIN + '","scopes":["admin"]}]'
ADMIN_SHA256 = hashlib.sha256(ADMIN.encode()).digest()


def signed(key: bytes, payload: str) -> str:
    return f"{payload}.{hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()}"


async def sessions(database_url: str) -> int:
    (row,) = await sql(database_url, "SELECT count(*) AS n FROM werk_sessions")
    return int(row["n"])


async def page_status(api: InProcess, cookie: str) -> int:
    api.http.cookies.clear()
    api.http.cookies.set("werk_session", cookie)
    status = (await api.http.get("/queues")).status_code
    api.http.cookies.clear()
    return status


async def test_what_werk_tokens_holds_mints_no_session(
    make_api: Callable[..., Any], database_url: str
) -> None:
    """Whoever reads WERK_TOKENS (the token's SHA-256) could sign the old cookies, with an
    expiry of their choosing; now a random key kept in the database signs them, and a cookie
    counts only for a session the server recorded."""
    api: InProcess = await make_api(tokens=TOKENS)
    assert await sql(database_url, "SELECT secret FROM werk_session_secret") == []
    old_key = hmac.new(ADMIN_SHA256, b"werk-session|", hashlib.sha256).digest()
    forged = [
        signed(old_key, "ops.team.1893456000"),  # the old scheme, valid to 2030
        signed(hmac.new(ADMIN_SHA256, b"", hashlib.sha256).digest(), "ops.team.sid0000000"),
        signed(ADMIN_SHA256, "ops.team.sid0000000"),
    ]
    for cookie in forged:
        assert await page_status(api, cookie) == 303, cookie
    assert (await login(api, ADMIN)).status_code == 303
    (row,) = await sql(database_url, "SELECT secret FROM werk_session_secret")
    assert len(row["secret"]) == 32 and row["secret"] not in (ADMIN_SHA256, ADMIN.encode())
    # The real key signs a cookie only the server can make live: a valid signature on an id it
    # never issued is refused too.
    key = hmac.new(row["secret"], b"werk-session|" + ADMIN_SHA256, hashlib.sha256).digest()
    assert await page_status(api, signed(key, "ops.team.never-issued-id")) == 303
    assert await sessions(database_url) == 1


async def test_the_key_is_shared_and_a_configured_secret_replaces_it(
    make_api: Callable[..., Any],
) -> None:
    first: InProcess = await make_api(tokens=TOKENS)
    second: InProcess = await make_api(tokens=TOKENS)
    configured: InProcess = await make_api(tokens=TOKENS, session_secret="s" * 40)
    await login(first, ADMIN)
    cookie = first.http.cookies["werk_session"]
    assert await page_status(second, cookie) == 200  # the same installation, the same key
    assert await page_status(configured, cookie) == 303  # another key signs there
    await login(configured, ADMIN)
    assert await page_status(configured, configured.http.cookies["werk_session"]) == 200


async def test_the_server_decides_when_a_session_expires(
    make_api: Callable[..., Any], database_url: str
) -> None:
    api: InProcess = await make_api(tokens=TOKENS, session_max_age=3600)
    stricter: InProcess = await make_api(tokens=TOKENS, session_max_age=600)
    await login(api, ADMIN)
    cookie = api.http.cookies["werk_session"]
    assert await page_status(api, cookie) == 200
    api.clock.advance(601)  # a lifetime lowered since the login applies to it
    assert await page_status(stricter, cookie) == 303
    assert await page_status(api, cookie) == 200
    api.clock.advance(3000)
    assert await page_status(api, cookie) == 303
    # the browser's copy cannot outlive the server's either: Max-Age matches
    api.http.cookies.clear()
    r = await login(api, ADMIN)
    assert "Max-Age=3600" in r.headers["set-cookie"]
    # expired sessions are forgotten by maintenance; live ones stay
    assert await sessions(database_url) == 2
    await api.maintain()
    assert await sessions(database_url) == 1


async def test_logout_ends_the_session_on_the_server(
    make_api: Callable[..., Any], database_url: str
) -> None:
    api: InProcess = await make_api(tokens=TOKENS)
    await login(api, ADMIN)
    cookie = api.http.cookies["werk_session"]
    assert (await api.http.post("/logout", headers=SAME_ORIGIN)).status_code == 303
    assert await page_status(api, cookie) == 303  # a copy kept by anyone is dead too
    assert await sessions(database_url) == 0


@pytest.fixture
def two_nodes(werk_server_factory: Callable[..., ServerProcess]) -> list[ServerProcess]:
    """Two servers on one database, started together, neither with WERK_SESSION_SECRET."""
    env = {"WERK_TOKENS": TOKENS_ENV}
    servers = [werk_server_factory(env) for _ in range(2)]
    return servers


def test_sessions_cross_nodes_and_logout_ends_them_everywhere(
    two_nodes: list[ServerProcess],
) -> None:
    a, b = two_nodes
    with httpx.Client(base_url=a.url) as client:
        r = client.post("/login", data={"token": ADMIN}, headers=SAME_ORIGIN)
        assert r.status_code == 303
        cookie = client.cookies["werk_session"]
    with httpx.Client(base_url=b.url, cookies={"werk_session": cookie}) as on_b:
        assert on_b.get("/queues").status_code == 200
        with httpx.Client(base_url=a.url, cookies={"werk_session": cookie}) as on_a:
            r = on_a.post("/logout", headers=SAME_ORIGIN)
            assert r.status_code == 303
        # replayed on the other node, a moment later: ended there too
        time.sleep(0.1)
        r = on_b.get("/queues")
        assert r.status_code == 303 and r.headers["location"].startswith("/login")


async def test_nodes_asking_at_once_keep_one_key(database_url: str) -> None:
    """Each node offers its own random key at first use; however many offer at once, one is
    kept and every node reads that one."""
    pool = await asyncpg.create_pool(database_url, min_size=8, max_size=8)
    try:
        offers = [secrets.token_bytes(32) for _ in range(8)]
        kept = await asyncio.gather(*(db_sessions.session_secret(pool, o) for o in offers))
    finally:
        await pool.close()
    assert len(set(kept)) == 1 and kept[0] in offers


def test_every_process_of_a_server_honours_every_session(
    werk_server_factory: Callable[..., ServerProcess],
) -> None:
    """`--workers 3`: processes that each learnt the key at their first use agree on it."""
    server = werk_server_factory({"WERK_TOKENS": TOKENS_ENV, "WERK_WORKERS": "3"})
    cookies = []
    for _ in range(6):  # new connections, spread over the processes
        r = httpx.post(server.url + "/login", data={"token": ADMIN}, headers=SAME_ORIGIN)
        assert r.status_code == 303
        cookies.append(r.cookies["werk_session"])
    for cookie in cookies:
        for _ in range(3):
            r = httpx.get(server.url + "/queues", cookies={"werk_session": cookie})
            assert r.status_code == 200
