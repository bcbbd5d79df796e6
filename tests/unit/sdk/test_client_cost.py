"""A client for an http:// server is cheap to build: it loads no TLS trust store (that happens on
the first https:// connection) and opens no connection until its first request. The docs still
recommend one long-lived client per process, for its kept-alive connections."""

from __future__ import annotations

import asyncio
import json
import ssl
import statistics
import time
from collections.abc import Callable

import msgspec
import pytest

from werk_client import AsyncClient, Client, protocol

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


def test_a_fetched_batch_decodes_at_a_few_times_the_cost_of_untyped_json() -> None:
    # A worker decodes every job it fetches into a JobRecord: typed decoding must stay a small
    # multiple of decoding the same answer into plain dicts and lists. The jobs leave out the
    # fields an answer may omit, whose defaults are where a slotted record paid the most.
    stamp = "2026-01-01T00:00:00.000000Z"
    jobs = [
        {
            "jid": f"job-{i:06d}",
            "jobtype": "noop",
            "args": [i],
            "queue": "default",
            "lease": f"00000000-0000-4000-8000-{i:012d}",
            "attempt": 1,
            "reserve_for": 1800,
            "retry": 25,
            "priority": 5,
            "created_at": stamp,
            "enqueued_at": stamp,
            "lease_expires_at": stamp,
        }
        for i in range(100)
    ]
    body = json.dumps({"jobs": jobs}).encode()
    untyped = msgspec.json.Decoder().decode
    assert len(protocol.parse_fetch(body)) == 100

    def median_of_rounds(decode: Callable[[bytes], object]) -> float:
        return median_ms(lambda: decode(body), rounds=200)

    # The two are measured in turn, so a stretch of load on a shared machine falls on both
    # alike rather than on whichever ran then.
    typed, plain = [], []
    for _ in range(5):
        typed.append(median_of_rounds(protocol.parse_fetch))
        plain.append(median_of_rounds(untyped))
    assert min(typed) < 4 * min(plain), (typed, plain)
