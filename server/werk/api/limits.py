"""Caps request bodies before anything parses them."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from werk.api.problems import werk_problem
from werk.errors import PayloadTooLarge


class ClientGone(Exception):
    """The client went away before its body arrived: there is no one to answer."""


async def read_body(scope: Scope, receive: Receive, max_bytes: int) -> bytes:
    """The whole body, refused (PayloadTooLarge) as soon as its declared length or the bytes
    received pass ``max_bytes``, before anything parses it."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = 0
            if declared > max_bytes:
                raise _too_large(max_bytes)
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > max_bytes:
            raise _too_large(max_bytes)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"request bodies are limited to {max_bytes} bytes (WERK_MAX_BODY_BYTES); split the batch"
    )


class BodyLimit:
    """Reads the body (bounded) before the app, and hands it over as one message."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(scope, receive, self.max_bytes)
        except ClientGone:
            return
        except PayloadTooLarge as exc:
            await werk_problem(exc)(scope, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that hands over ``body`` (already read) as one message, then defers to
    ``receive`` (for the disconnect)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
