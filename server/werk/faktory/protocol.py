"""FWP framing: command lines in, RESP-style replies out, and the password handshake. Pure
functions, no I/O."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

VERSION = 2
OK = b"+OK\r\n"
NIL = b"$-1\r\n"


class ProtocolError(Exception):
    """A command the server cannot accept; the message becomes ``-ERR <message>``."""

    def __init__(self, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.close = close


class PasswordRejected(ProtocolError):
    """HELLO presented a wrong (or no) password hash."""

    def __init__(self) -> None:
        super().__init__("Invalid password", close=True)


@dataclass(frozen=True, slots=True)
class Command:
    verb: str
    payload: str  # everything after the first space; may itself contain spaces


def parse_line(line: bytes) -> Command | None:
    """One command line without its line ending. None for a blank line (not a command)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("commands must be UTF-8 text") from None
    text = text.strip(" \t")
    if not text:
        return None
    verb, _, payload = text.partition(" ")
    return Command(verb=verb.upper(), payload=payload.strip(" \t"))


def load_json(payload: str, what: str) -> Any:
    """Strict JSON: no NaN/Infinity. The standard parser keeps big integers exact (orjson would
    turn integers beyond 64 bits into floats silently), so the limits can reject them."""
    if not payload:
        raise ProtocolError(f"{what} needs a JSON payload")
    try:
        return json.loads(payload, parse_constant=_no_constant)
    except RecursionError:
        raise ProtocolError(f"invalid JSON in {what}: nested too deeply") from None
    except ValueError as exc:
        raise ProtocolError(f"invalid JSON in {what}: {exc}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def dump_json(value: Any) -> bytes:
    """Compact JSON (no spaces), datetimes in RFC 3339 with a ``Z``."""
    return orjson.dumps(value, option=orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC)


def simple(text: str) -> bytes:
    return b"+" + _one_line(text).encode() + b"\r\n"


def error(message: str, code: str = "ERR") -> bytes:
    return f"-{code} {_one_line(message)}\r\n".encode()


def bulk(data: bytes) -> bytes:
    """A bulk string. Never ``$0`` (the Node client throws on it): empty data is sent as nil."""
    if not data:
        return NIL
    return b"$" + str(len(data)).encode() + b"\r\n" + data + b"\r\n"


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


# -- the handshake ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Challenge:
    """What the greeting asks of the client: a salt and an iteration count (when a password is
    required)."""

    salt: str | None
    iterations: int

    @classmethod
    def new(cls, required: bool) -> Challenge:
        if not required:
            return cls(salt=None, iterations=1)
        return cls(salt=secrets.token_hex(8), iterations=1000 + secrets.randbelow(4000))

    def greeting(self) -> bytes:
        hi: dict[str, Any] = {"v": VERSION}
        if self.salt is not None:
            hi["i"] = self.iterations
            hi["s"] = self.salt
        return b"+HI " + dump_json(hi) + b"\r\n"


def password_hash(password: str, salt: str, iterations: int) -> str:
    """Lowercase hex SHA-256 applied ``iterations`` times: first to password + salt, then to the
    previous (binary) digest."""
    digest = hashlib.sha256((password + salt).encode()).digest()
    for _ in range(max(iterations, 1) - 1):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()


def hash_matches(pwdhash: str, password: str, salt: str, iterations: int) -> bool:
    return hmac.compare_digest(
        pwdhash.lower().encode(), password_hash(password, salt, iterations).encode()
    )
