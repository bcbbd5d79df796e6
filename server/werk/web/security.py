"""The dashboard's defences: login sessions, same-origin checks for unsafe requests, a CSP nonce
per response, no caching, and the path prefix a trusted reverse proxy announces."""

from __future__ import annotations

import re
import secrets
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import FastAPI, Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from werk.errors import CrossSiteRequest
from werk.http.proxies import forwarded
from werk.services.access import Authenticator, Principal
from werk.services.container import Services

SESSION_COOKIE = "werk_session"
_PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)+$")


class LoginRequired(Exception):
    """Rendered as a redirect to the login page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def root(request: Request) -> str:
    """The path prefix the dashboard lives under ('' at the top of the host)."""
    value: str = request.scope.get("root_path", "") or ""
    return value.rstrip("/")


def local_path(request: Request) -> str:
    """The request's path below the prefix, with its query."""
    path = request.url.path
    prefix = root(request)
    if prefix and path.startswith(prefix + "/"):
        path = path[len(prefix) :]
    return path + (f"?{request.url.query}" if request.url.query else "")


def safe_next(value: str | None) -> str:
    """Only paths on this dashboard are followed after login or an action (no open redirect)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    if any(ord(c) < 0x20 for c in value):
        return "/"
    return value


async def current_user(request: Request) -> Principal | None:
    """The logged-in operator; None when auth is off (everything open on loopback). Raises
    LoginRequired when auth is on and the session is missing, expired, ended, or lacks admin."""
    auth: Authenticator = request.app.state.auth
    if not auth.enabled:
        return None
    services: Services = request.app.state.services
    token = await services.sessions.holder(request.cookies.get(SESSION_COOKIE))
    principal = Principal(token.name, frozenset(token.scopes)) if token else None
    if principal is None or not principal.allows("admin"):
        raise LoginRequired(local_path(request))
    return principal


def check_same_origin(request: Request) -> None:
    """Unsafe requests must come from our own pages: Sec-Fetch-Site when the browser sends it,
    else Origin (then Referer) must name this host. Applies with or without tokens, so that a web
    page cannot drive a dashboard on localhost either."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site == "same-origin":
            return
        raise CrossSiteRequest(f"cross-site request refused (Sec-Fetch-Site: {site})")
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        raise CrossSiteRequest("request refused: no Origin or Referer to prove it is same-origin")
    host = request.headers.get("host", "")
    if forwarded(request.scope):  # the name the client used, as our own proxy reports it
        host = request.headers.get("x-forwarded-host", host).rsplit(",", 1)[-1].strip()
    try:
        netloc = urlsplit(source).netloc
    except ValueError:  # e.g. an unclosed IPv6 bracket: it names no origin
        netloc = ""
    if netloc.lower() != host.lower():
        raise CrossSiteRequest("cross-site request refused (Origin does not match Host)")


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def harden(response: Response, nonce: str) -> Response:
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'self'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    return response


def set_session(request: Request, response: Response, value: str, max_age: int) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        value,
        max_age=max_age,
        path=(root(request) or "") + "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_session(request: Request, response: Response) -> None:
    response.delete_cookie(
        SESSION_COOKIE,
        path=(root(request) or "") + "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def install_handlers(app: FastAPI) -> None:
    async def on_login_required(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginRequired)
        target = f"{root(request)}/login?next={quote(exc.next_path, safe='')}"
        return harden(RedirectResponse(target, status_code=303), new_nonce())

    app.add_exception_handler(LoginRequired, on_login_required)


class ForwardedPrefix:
    """Serves under a path prefix: the one a trusted proxy announces in X-Forwarded-Prefix, else
    WERK_ROOT_PATH, else the server's own root_path. Links and cookies then carry it; requests
    may arrive with the prefix or with it stripped. Only a plain path is accepted."""

    def __init__(self, app: ASGIApp, default: str = "") -> None:
        self.app = app
        self.default = default.rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            prefix = self.default
            for name, value in scope["headers"] if forwarded(scope) else ():
                if name == b"x-forwarded-prefix":
                    announced = value.decode("latin-1").rstrip("/")
                    if _PREFIX.fullmatch(announced):
                        prefix = announced
                    break
            if prefix:
                # In place: the route the router notes in the scope is what the request timer,
                # further out, labels the request with.
                scope["root_path"] = prefix
        await self.app(scope, receive, send)


def template_globals(request: Request, nonce: str, user: Principal | None) -> dict[str, Any]:
    auth: Authenticator = request.app.state.auth
    return {"root": root(request), "nonce": nonce, "user": user, "auth_enabled": auth.enabled}
