"""Who may do what: bearer tokens with scopes, and a limit on failed attempts per client. The
API and the dashboard's login decide with them, FWP counts wrong passwords with the limiter
(dashboard sessions: services.sessions).

Tokens are configured by their SHA-256 only; a presented token is hashed and compared with every
configured hash in constant time (no early exit). ``admin`` satisfies every scope.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from werk.config import Settings
from werk.errors import TooManyAuthFailures, Unauthorized

WINDOW_SECONDS = 60.0
# Clients tracked by the failure limiter at most (the oldest are forgotten first).
MAX_TRACKED_CLIENTS = 10_000


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
