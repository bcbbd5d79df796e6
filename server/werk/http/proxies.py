"""Which X-Forwarded-* headers to believe: only those a configured reverse proxy sent.

Anyone can send X-Forwarded-Host or -For; believed from any client, they would let a page on
another site pass the dashboard's same-origin check, or let a client pick the address the
failure limiter counts. So they count only on connections from WERK_TRUSTED_PROXIES, and this
wrapper, around everything else, applies them there: the client's address (X-Forwarded-For, read
from the right past our own proxies) and the scheme (X-Forwarded-Proto). It marks such requests,
and only those, as forwarded (``forwarded``), for the Host and path prefix the proxy announces.
With no proxies configured the wrapper is not installed and no X-Forwarded-* header counts.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Set (to True) in the scope of a request that arrived through a trusted proxy.
FORWARDED_KEY = "werk.forwarded"


def forwarded(scope: Scope) -> bool:
    return bool(scope.get(FORWARDED_KEY))


def client_address(request: Request) -> str:
    """The peer's address, or behind a trusted proxy the one it forwarded for."""
    return request.client.host if request.client else "unknown"


class TrustedProxies:
    def __init__(self, app: ASGIApp, proxies: Sequence[Network]) -> None:
        self.app = app
        self.proxies = tuple(proxies)

    def trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] == "http" and client and self.trusted(client[0]):
            scope = dict(scope)
            scope[FORWARDED_KEY] = True
            hops: list[str] = []
            for name, value in scope["headers"]:
                if name == b"x-forwarded-for":
                    hops.extend(value.decode("latin-1").split(","))
                elif name == b"x-forwarded-proto":
                    proto = value.decode("latin-1").strip().lower()
                    if proto in ("http", "https"):
                        scope["scheme"] = proto
            for hop in reversed(hops):  # the nearest address no proxy of ours stands for
                address = hop.strip()
                if not self.trusted(address):
                    if _is_address(address):
                        scope["client"] = (address, 0)
                    break
        await self.app(scope, receive, send)


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
