"""Bearer tokens with scopes, the dashboard's session cookie, and a limit on failed attempts.

Tokens are configured by their SHA-256 only; a presented token is hashed and compared with every
configured hash in constant time (no early exit). ``admin`` satisfies every scope. With no tokens
configured the server only binds loopback (see config) and everything here lets requests through.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.responses import Response

from werk.api.problems import werk_problem
from werk.config import Scope, Settings
from werk.errors import Forbidden, TooManyAuthFailures, Unauthorized, WerkError

WINDOW_SECONDS = 60.0
# Clients tracked by the failure limiter at most (the oldest are forgotten first).
MAX_TRACKED_CLIENTS = 10_000

bearer = HTTPBearer(auto_error=False, description="A token from WERK_TOKENS")


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes


class FailureLimiter:
    """Counts failed authentications per client address over a sliding minute."""

    def __init__(self, per_minute: int, now: Callable[[], float] = time.monotonic) -> None:
        self._limit = per_minute
        self._now = now
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, client: str) -> float | None:
        """Seconds until the client may try again, or None when it is not blocked."""
        failures = self._failures.get(client)
        if not failures:
            return None
        horizon = self._now() - WINDOW_SECONDS
        while failures and failures[0] <= horizon:
            failures.popleft()
        if len(failures) < self._limit:
            return None
        return max(failures[0] - horizon, 1.0)

    def record(self, client: str) -> None:
        failures = self._failures.setdefault(client, deque(maxlen=self._limit))
        failures.append(self._now())
        self._failures.move_to_end(client)
        while len(self._failures) > MAX_TRACKED_CLIENTS:
            self._failures.popitem(last=False)


class Authenticator:
    def __init__(self, settings: Settings) -> None:
        self.enabled = bool(settings.tokens)
        self.metrics_public = settings.metrics_public
        self.session_max_age = settings.session_max_age
        secret = settings.session_secret.get_secret_value() if settings.session_secret else ""
        self._secret = secret.encode()
        self._tokens = [
            (bytes.fromhex(t.sha256 or ""), Principal(t.name, frozenset(t.scopes)))
            for t in settings.tokens
        ]
        self.limiter = FailureLimiter(settings.auth_failures_per_minute)

    # -- tokens --------------------------------------------------------------------------

    def identify(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for stored, principal in self._tokens:  # every comparison runs: no timing signal
            if hmac.compare_digest(digest, stored):
                found = principal
        return found

    def check_client(self, client: str) -> None:
        wait = self.limiter.retry_after(client)
        if wait is not None:
            raise TooManyAuthFailures(
                f"too many failed authentication attempts from this address; retry in {wait:.0f} s"
            )

    def authenticate(self, client: str, token: str | None) -> Principal:
        """The principal of a presented bearer token; 401 when missing or unknown (an unknown
        token counts toward the client's failure limit), 429 while the client is blocked."""
        self.check_client(client)
        if not token:
            raise Unauthorized(
                "send the header 'Authorization: Bearer <token>' with a token from WERK_TOKENS"
            )
        principal = self.identify(token)
        if principal is None:
            self.limiter.record(client)
            raise Unauthorized("the bearer token is not valid")
        return principal

    # -- dashboard sessions (stateless, signed; valid on every node with the same config) ----

    def _sign(self, stored: bytes, payload: str) -> str:
        key = hmac.new(stored, b"werk-session|" + self._secret, hashlib.sha256).digest()
        return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()

    def issue_session(self, principal: Principal, now: float | None = None) -> str:
        expires = int((now if now is not None else time.time()) + self.session_max_age)
        payload = f"{principal.name}.{expires}"
        for stored, candidate in self._tokens:
            if candidate == principal:
                return f"{payload}.{self._sign(stored, payload)}"
        raise ValueError("unknown principal")

    def session_principal(self, cookie: str | None, now: float | None = None) -> Principal | None:
        """The principal a session cookie stands for, if it is authentic and unexpired. Removing
        a token from the configuration ends its sessions."""
        if not cookie:
            return None
        rest, _, signature = cookie.rpartition(".")
        name, _, expires = rest.rpartition(".")  # names may contain dots
        if not expires.isdigit() or int(expires) < (now if now is not None else time.time()):
            return None
        found = None
        for stored, principal in self._tokens:
            expected = self._sign(stored, f"{name}.{expires}")
            if hmac.compare_digest(expected, signature) and principal.name == name:
                found = principal
        return found


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


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
        token = credentials.credentials if credentials else None
        principal = auth.authenticate(client_address(request), token)
        needed = tuple(read) if read and request.method in ("GET", "HEAD") else (scope,)
        if not any(principal.allows(s) for s in needed):
            raise Forbidden(
                f"token {principal.name!r} has scopes {sorted(principal.scopes)}; this request "
                f"needs {' or '.join(dict.fromkeys([*needed, 'admin']))}"
            )
        request.state.principal = principal

    return dependency


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
