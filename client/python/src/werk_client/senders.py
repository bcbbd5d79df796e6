"""How the clients put a ``Call`` on the wire: over this package's own HTTP/1.1 connections
(``transport``), or through httpx when the caller hands in an httpx transport (tests, custom
networking) or the environment names a proxy for the server's address.

Either way a sender answers with a ``transport.Response`` or raises ``transport.ConnectError``
(not sent) / ``transport.ReadError`` (maybe processed), which is all the retry logic needs.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .protocol import Call
from .transport import (
    KEEPALIVE_EXPIRY,
    AsyncPool,
    ConnectError,
    Origin,
    ReadError,
    Response,
    SyncPool,
    encode_head,
    request_bytes,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["AsyncSender", "Sender", "async_sender", "sync_sender"]

MAX_IDLE = 20


class Sender(Protocol):
    def send(self, call: Call, timeout: float) -> Response: ...

    def close(self) -> None: ...


class AsyncSender(Protocol):
    async def send(self, call: Call, within: float) -> Response: ...

    async def aclose(self) -> None: ...


def _fixed_headers(headers: Mapping[str, str]) -> bytes:
    return "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")


def _proxied(origin: Origin) -> bool:
    """Whether ``*_PROXY`` environment variables send requests for this origin via a proxy."""
    proxies = urllib.request.getproxies_environment()
    if origin.scheme not in proxies and "all" not in proxies:
        return False
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return not bypass(origin.host, proxies)


def _pool_options(limits: Any) -> dict[str, Any]:
    """What an ``httpx.Limits`` given to the client means for its own connections."""
    if limits is None:
        return {}
    options: dict[str, Any] = {}
    if getattr(limits, "max_keepalive_connections", None) is not None:
        options["max_idle"] = limits.max_keepalive_connections
    if getattr(limits, "keepalive_expiry", None) is not None:
        options["keepalive_expiry"] = limits.keepalive_expiry
    if hasattr(limits, "max_connections"):
        options["max_connections"] = limits.max_connections
    return options


class _Native:
    def __init__(self, origin: Origin, headers: Mapping[str, str]) -> None:
        self._origin = origin
        self._fixed = _fixed_headers(headers)

    def _bytes(self, call: Call) -> bytes:
        head = encode_head(call.method, call.path, self._origin, self._fixed, call.headers)
        return request_bytes(head, call.body())


class NativeSender(_Native):
    def __init__(
        self, origin: Origin, headers: Mapping[str, str], timeout: float, limits: Any
    ) -> None:
        super().__init__(origin, headers)
        options = {"max_idle": MAX_IDLE, "keepalive_expiry": KEEPALIVE_EXPIRY}
        self._pool = SyncPool(origin, timeout, **{**options, **_pool_options(limits)})

    def send(self, call: Call, timeout: float) -> Response:
        return self._pool.request(self._bytes(call), timeout)

    def close(self) -> None:
        self._pool.close()


class AsyncNativeSender(_Native):
    def __init__(
        self, origin: Origin, headers: Mapping[str, str], timeout: float, limits: Any
    ) -> None:
        super().__init__(origin, headers)
        options = {"max_idle": MAX_IDLE, "keepalive_expiry": KEEPALIVE_EXPIRY}
        self._pool = AsyncPool(origin, timeout, **{**options, **_pool_options(limits)})

    async def send(self, call: Call, within: float) -> Response:
        return await self._pool.request(self._bytes(call), within)

    def keep_idle(self, connections: int) -> None:
        """As many connections as requests in flight, and that many kept when idle."""
        self._pool.max_idle = connections
        self._pool.max_connections = None

    async def aclose(self) -> None:
        self._pool.close()


def _translate(exc: Exception) -> Exception:
    import httpx

    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return ConnectError(text)
    return ReadError(text)


def _headers(call: Call) -> dict[str, str]:
    headers = {"Content-Type": "application/json"} if call.json is not None else {}
    if call.headers:
        headers.update(call.headers)
    return headers


def _answer(response: httpx.Response) -> Response:
    return Response(
        response.status_code,
        response.content,
        headers=response.headers,
        reason=response.reason_phrase,
    )


def _httpx_options(url: str, headers: Mapping[str, str], timeout: float, limits: Any) -> Any:
    import httpx

    return {
        "base_url": url,
        "headers": dict(headers),
        "timeout": timeout,
        "limits": limits or httpx.Limits(max_connections=100, max_keepalive_connections=20),
    }


class HttpxSender:
    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        timeout: float,
        transport: httpx.BaseTransport | None,
        limits: Any,
    ) -> None:
        import httpx

        options = _httpx_options(url, headers, timeout, limits)
        self._http = httpx.Client(transport=transport, **options)

    def send(self, call: Call, timeout: float) -> Response:
        import httpx

        try:
            response = self._http.request(
                call.method, call.path, content=call.body(), headers=_headers(call), timeout=timeout
            )
        except httpx.TransportError as exc:
            raise _translate(exc) from exc
        return _answer(response)

    def close(self) -> None:
        self._http.close()


class AsyncHttpxSender:
    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        timeout: float,
        transport: httpx.AsyncBaseTransport | None,
        limits: Any,
    ) -> None:
        import httpx

        options = _httpx_options(url, headers, timeout, limits)
        self._http = httpx.AsyncClient(transport=transport, **options)

    async def send(self, call: Call, within: float) -> Response:
        import httpx

        try:
            response = await self._http.request(
                call.method, call.path, content=call.body(), headers=_headers(call), timeout=within
            )
        except httpx.TransportError as exc:
            raise _translate(exc) from exc
        return _answer(response)

    async def aclose(self) -> None:
        await self._http.aclose()


def sync_sender(
    url: str,
    headers: Mapping[str, str],
    timeout: float,
    transport: httpx.BaseTransport | None,
    limits: Any,
) -> Sender:
    origin = Origin.parse(url)
    if transport is not None or _proxied(origin):
        return HttpxSender(url, headers, timeout, transport, limits)
    return NativeSender(origin, headers, timeout, limits)


def async_sender(
    url: str,
    headers: Mapping[str, str],
    timeout: float,
    transport: httpx.AsyncBaseTransport | None,
    limits: Any,
) -> AsyncSender:
    origin = Origin.parse(url)
    if transport is not None or _proxied(origin):
        return AsyncHttpxSender(url, headers, timeout, transport, limits)
    return AsyncNativeSender(origin, headers, timeout, limits)
