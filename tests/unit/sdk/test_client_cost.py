"""A client for an http:// server is cheap to build: it loads no TLS trust store (that happens on
the first https:// connection) and opens no connection until its first request. The docs still
recommend one long-lived client per process, for its kept-alive connections."""

from __future__ import annotations

import asyncio
import ssl
import statistics
import time
from collections.abc import Callable

import pytest

from werk_client import AsyncClient, Client

URL = "http://127.0.0.1:7420"
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)


def test_clients_for_http_urls_load_no_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> ssl.SSLContext:
        raise AssertionError("a client for an http:// URL built a TLS context")

    monkeypatch.setattr(ssl, "create_default_context", refuse)
    monkeypatch.setattr(ssl, "SSLContext", refuse)
    Client(URL).close()
    asyncio.run(AsyncClient(URL).aclose())


def median_ms(build: Callable[[], object], rounds: int = 300) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        build()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def test_building_a_client_costs_under_a_millisecond() -> None:
    clients: list[Client] = []
    assert median_ms(lambda: clients.append(Client(URL))) < 1.0
    for client in clients:
        client.close()


def test_building_an_async_client_costs_under_a_millisecond() -> None:
    clients: list[AsyncClient] = []
    assert median_ms(lambda: clients.append(AsyncClient(URL))) < 1.0

    async def close_all() -> None:
        for client in clients:
            await client.aclose()

    asyncio.run(close_all())
