"""Authentication on HTTP: the bearer token of a request checked against the scopes its router
needs (the decisions: services.access), and the rules every request meets first (RequestGuard).
With no tokens configured the server only binds loopback (see config): RequestGuard then keeps
other sites' pages and foreign host names out, and the rest lets requests through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as ASGIScope

from werk.api.problems import werk_problem
from werk.config import Scope, Settings
from werk.errors import (
    AmbiguousCredentials,
    CrossSiteRequest,
    Forbidden,
    HostNotAllowed,
    TooManyAuthFailures,
    Unauthorized,
    WerkError,
)
from werk.http.proxies import client_address
from werk.services.access import WINDOW_SECONDS, Authenticator, Principal

bearer = HTTPBearer(auto_error=False, description="A token from WERK_TOKENS")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Orchestrators probe a node by its address, whatever its names; the probes reveal nothing.
PROBES = frozenset({"/livez", "/readyz"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_CROSS_SITE = (
    "without tokens, a page on another site may not change anything here (only requests from "
    "the server's own pages, and from clients that send no Origin, may)"
)


class RequestGuard:
    """Rules that hold for every request, on every path: it sits in front of the job traffic's
    router and of FastAPI's (see werk.app).

    - One Authorization header at most: parts of the stack would read different ones.
    - The Host must be one of the server's names (a DNS-rebinding page sends its own): the
      loopback names, the bind host and WERK_ALLOWED_HOSTS. Always without tokens; with tokens,
      which already keep such pages out, only when WERK_ALLOWED_HOSTS is set.
    - Without tokens, a request that changes something must not come from another site's page
      (Sec-Fetch-Site, else Origin). Clients that send neither (curl, the SDKs) pass.
    """

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self._open = not settings.tokens
        listed = frozenset(settings.allowed_hosts)
        checked = (self._open or listed) and "*" not in listed
        self._hosts = listed | LOOPBACK_NAMES | {host_name(settings.host)} if checked else None
        # An Origin naming a listed host is ours even when a proxy rewrote the Host.
        self._origins = listed - {"*"}

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        refused = self.refusal(scope) if scope["type"] == "http" else None
        if refused is None:
            await self.app(scope, receive, send)
            return
        response = werk_problem(refused)
        if isinstance(refused, Unauthorized):
            response.headers["WWW-Authenticate"] = 'Bearer realm="werk"'
        await response(scope, receive, send)

    def refusal(self, scope: ASGIScope) -> WerkError | None:
        hosts: list[bytes] = []
        authorizations = 0
        origin = site = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorizations += 1
            elif name == b"host":
                hosts.append(value)
            elif name == b"origin":
                origin = value
            elif name == b"sec-fetch-site":
                site = value
        host = hosts[0].decode("latin-1").lower() if hosts else ""
        if scope["path"] not in PROBES and self._foreign(hosts, host):
            return HostNotAllowed(
                f"this server does not answer to the host {host[:100]!r}; if that is one of "
                "its names, add it to WERK_ALLOWED_HOSTS"
            )
        if authorizations > 1:
            return AmbiguousCredentials("send one Authorization header, not several")
        if not self._open or scope["method"] in SAFE_METHODS:
            return None
        if site in (b"cross-site", b"same-site"):
            return CrossSiteRequest(f"Sec-Fetch-Site: {site.decode('latin-1')}; {_CROSS_SITE}")
        if origin is not None and not self._ours(origin.decode("latin-1"), host):
            return CrossSiteRequest(f"the Origin is not this server; {_CROSS_SITE}")
        return None

    def _ours(self, origin: str, host: str) -> bool:
        try:
            source = urlsplit(origin).netloc.lower()
        except ValueError:  # e.g. an unclosed IPv6 bracket
            return False
        return bool(source) and (source == host or host_name(source) in self._origins)

    def _foreign(self, hosts: list[bytes], host: str) -> bool:
        if self._hosts is None:
            return False
        return len(hosts) > 1 or (bool(hosts) and host_name(host) not in self._hosts)


def host_name(value: str) -> str:
    """The name in a Host value or a URL's netloc: no port, no brackets around an IPv6
    address."""
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        return value.partition(":")[0]
    return value  # a name, or an IPv6 address as the bind host is written


def authorize(
    scope: Scope, *, read: Collection[Scope] = (), public: Collection[str] = ()
) -> Callable[..., Awaitable[None]]:
    """A router-level dependency: the request needs a token with ``scope`` (or ``admin``).
    ``read`` widens GET/HEAD to any of those scopes; routes whose path is in ``public`` are
    open."""

    async def dependency(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Security(bearer),  # noqa: B008
    ) -> None:
        auth: Authenticator = request.app.state.auth
        if not auth.enabled:
            return
        route = request.scope.get("route")
        if getattr(route, "path", None) in public:
            return
        if scope == "metrics" and auth.metrics_public:
            return
        needed = tuple(read) if read and request.method in ("GET", "HEAD") else (scope,)
        request.state.principal = authenticated(
            auth,
            client_address(request),
            credentials.credentials if credentials else None,
            needed,
        )

    return dependency


def bearer_token(authorization: str) -> str | None:
    """The token of an Authorization header value, read as ``bearer`` reads it."""
    kind, token = get_authorization_scheme_param(authorization)
    return token if kind.lower() == "bearer" and token else None


def authenticated(
    auth: Authenticator, client: str, token: str | None, needed: Collection[Scope]
) -> Principal:
    """The principal of ``token`` when it has one of the ``needed`` scopes (or ``admin``)."""
    principal = auth.authenticate(client, token)
    if not any(principal.allows(s) for s in needed):
        raise Forbidden(
            f"token {principal.name!r} has scopes {sorted(principal.scopes)}; this request "
            f"needs {' or '.join(dict.fromkeys([*needed, 'admin']))}"
        )
    return principal


def document_public(app: FastAPI, paths: Collection[str]) -> None:
    """Routers carry the bearer requirement into the OpenAPI document; mark the open routes
    (health probes) as needing no token."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        for path in paths:
            for operation in schema.get("paths", {}).get(path, {}).values():
                operation["security"] = []
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI, settings: Settings) -> None:
    """Keeps the authenticator on the app and adds the headers auth errors need."""
    app.state.auth = Authenticator(settings)

    async def on_unauthorized(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WerkError)
        response = werk_problem(exc)
        response.headers["WWW-Authenticate"] = 'Bearer realm="werk"'
        return response

    async def on_too_many(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WerkError)
        response = werk_problem(exc)
        response.headers["Retry-After"] = str(int(WINDOW_SECONDS))
        return response

    app.add_exception_handler(Unauthorized, on_unauthorized)
    app.add_exception_handler(TooManyAuthFailures, on_too_many)
