"""Starting and stopping the FWP listener with the app."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from tests.integration.faktory.fwp import Fwp, job
from werk.app import create_app
from werk.config import Settings
from werk.faktory.server import FaktoryConfigError, FaktoryServer


async def test_port_zero_disables_fwp(make_settings, clock):
    app = create_app(make_settings(faktory_port=0), clock=clock, background=False)
    async with app.router.lifespan_context(app):
        assert app.state.faktory.port is None


async def test_an_explicit_port_in_use_fails_the_start(make_settings, clock):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = create_app(make_settings(faktory_port=port), clock=clock, background=False)
        with pytest.raises(FaktoryConfigError, match="cannot listen"):
            async with app.router.lifespan_context(app):
                pass


async def test_the_default_port_in_use_only_warns(database_url, caplog):
    """`werk serve` without FWP settings keeps serving HTTP when 7419 is taken (by Faktory
    itself, say), and says so."""
    settings = Settings(database_url=database_url)
    assert "faktory_port" not in settings.model_fields_set
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            taken.bind(("127.0.0.1", settings.faktory_port))
        except OSError:
            pass  # already taken by someone else: just as good for this test
        else:
            taken.listen()
        server = FaktoryServer(settings, services=None, ops=None, unavailable=())  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, logger="werk.faktory.server"):
            assert await server.start() is False
        assert "FWP) is off" in caplog.text
        await server.close()


def test_public_address_without_password_is_refused(make_settings):
    fields = {"faktory_port": 1, "faktory_host": "0.0.0.0"}
    server = FaktoryServer(make_settings(**fields), services=None, ops=None, unavailable=())  # type: ignore[arg-type]
    assert "without a password" in (server.check() or "")
    with_password = make_settings(**fields, faktory_password="pw")
    assert FaktoryServer(with_password, None, None, unavailable=()).check() is None  # type: ignore[arg-type]


async def test_shutdown_closes_idle_connections_and_finishes_busy_ones(make_settings, clock):
    from tests.integration.faktory.fwp import free_port

    port = free_port()
    app = create_app(
        make_settings(faktory_port=port, faktory_fetch_wait=1.0), clock=clock, background=False
    )
    async with app.router.lifespan_context(app):
        idle = await Fwp.connect(port)
        busy = await Fwp.connect(port, wid="shutdown-w")
        fetch = asyncio.create_task(busy.call("FETCH nothing-here"))
        await asyncio.sleep(0.2)
        await app.state.faktory.close()
        assert (await fetch).text is None  # the FETCH in progress got its answer
        assert await idle.closed()
        assert await busy.closed()
        await idle.close()
        await busy.close()


async def test_connections_counted_in_info(fwp):
    a = await Fwp.connect(fwp.port)
    b = await Fwp.connect(fwp.port)
    assert (await a.call("INFO")).json["server"]["connections"] == 2
    await b.send_raw(b"END\r\n")
    assert await b.closed()
    await asyncio.sleep(0.1)
    assert (await a.call("INFO")).json["server"]["connections"] == 1
    assert str(await a.cmd("PUSH", job("counted1"))) == "+OK"
    await a.close()


def test_bearer_tokens_without_an_fwp_password_keep_fwp_off(make_settings):
    """FWP's handshake cannot check a token (Werk keeps only token hashes), so with tokens
    configured FWP needs its own password rather than running open."""
    tokens = [{"name": "ops", "token": "t" * 32, "scopes": ["admin"]}]
    server = FaktoryServer(make_settings(tokens=tokens), None, None, unavailable=())  # type: ignore[arg-type]
    assert "WERK_FAKTORY_PASSWORD" in (server.check() or "")
    with_password = make_settings(tokens=tokens, faktory_password="pw")
    assert FaktoryServer(with_password, None, None, unavailable=()).check() is None  # type: ignore[arg-type]


async def test_explicit_port_with_tokens_and_no_password_fails_the_start(make_settings, clock):
    from tests.integration.faktory.fwp import free_port

    tokens = [{"name": "ops", "token": "t" * 32, "scopes": ["admin"]}]
    settings = make_settings(tokens=tokens, faktory_port=free_port())
    app = create_app(settings, clock=clock, background=False)
    with pytest.raises(FaktoryConfigError, match="tokens"):
        async with app.router.lifespan_context(app):
            pass
