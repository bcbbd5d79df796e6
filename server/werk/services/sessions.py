"""Dashboard logins, valid on every node that shares the database.

A session cookie reads ``<token name>.<session id>.<signature>``. The signature is keyed by a
secret (WERK_SESSION_SECRET, else a random key kept in the database) and by the hash of the token
that logged in, so nobody can mint one from the configuration, and replacing or removing a token
ends its sessions. The cookie is honoured only while the server holds a live row for its id: the
server decides when it expires (at login + WERK_SESSION_MAX_AGE, shortened if that setting is
lowered later), and logging out deletes the row on every node at once."""

from __future__ import annotations

import hashlib
import hmac
import secrets

import asyncpg

from werk.config import Settings, TokenConfig
from werk.db import sessions
from werk.domain.clock import Clock

# A cookie longer than any this service issues is not looked at (token names are at most 100).
MAX_COOKIE = 300


class SessionService:
    def __init__(self, pool: asyncpg.Pool, clock: Clock, settings: Settings) -> None:
        self._pool = pool
        self._clock = clock
        self.max_age = settings.session_max_age
        configured = settings.session_secret
        self._secret = configured.get_secret_value().encode() if configured else None
        self._tokens = [(bytes.fromhex(t.sha256 or ""), t) for t in settings.tokens]

    async def issue(self, name: str, token_sha256: bytes) -> str:
        """A new session for the token ``name`` whose SHA-256 is given; returns the cookie."""
        sid = secrets.token_urlsafe(32)
        payload = f"{name}.{sid}"
        await sessions.create_session(
            self._pool, self._clock.now(), _row_id(sid), name, self.max_age
        )
        return f"{payload}.{await self._sign(token_sha256, payload)}"

    async def holder(self, cookie: str | None) -> TokenConfig | None:
        """The configured token a cookie's live session belongs to, if any."""
        parts = _parse(cookie)
        if parts is None:
            return None
        name, sid, signature = parts
        found = None
        for stored, token in self._tokens:  # every comparison runs: no timing signal
            expected = await self._sign(stored, f"{name}.{sid}")
            if hmac.compare_digest(expected.encode(), signature) and token.name == name:
                found = token
        if found is None:
            return None
        live = await sessions.session_live(
            self._pool, self._clock.now(), _row_id(sid), name, self.max_age
        )
        return found if live else None

    async def end(self, cookie: str | None) -> None:
        """Log out: the cookie's session is no longer honoured anywhere."""
        parts = _parse(cookie)
        if parts is not None:
            await sessions.end_session(self._pool, _row_id(parts[1]))

    async def _sign(self, token_sha256: bytes, payload: str) -> str:
        if self._secret is None:  # several nodes may ask at once: they all get the one key kept
            self._secret = await sessions.session_secret(self._pool, secrets.token_bytes(32))
        key = hmac.new(self._secret, b"werk-session|" + token_sha256, hashlib.sha256).digest()
        return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()


def _parse(cookie: str | None) -> tuple[str, str, bytes] | None:
    if not cookie or len(cookie) > MAX_COOKIE or not cookie.isascii():
        return None
    rest, _, signature = cookie.rpartition(".")
    name, _, sid = rest.rpartition(".")  # names may contain dots; ids and signatures do not
    if not name or not sid:
        return None
    return name, sid, signature.encode()


def _row_id(sid: str) -> bytes:
    """The database keeps only a hash of the id: reading the table yields no usable cookie."""
    return hashlib.sha256(sid.encode()).digest()
