"""Noticing that the client of a long poll has gone.

Once a request's body has been read, the server's next ``receive()`` returns only when the client
disconnects (``http.disconnect``). A long-polling fetch watches for it, so that a worker that
timed out or died does not leave behind a waiting fetch that jobs would then be reserved for and
never delivered to."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.types import Receive


@contextlib.asynccontextmanager
async def disconnection(receive: Receive) -> AsyncIterator[asyncio.Event]:
    """Yields an event set when the client disconnects (call after the body was read)."""
    gone = asyncio.Event()

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    watcher = asyncio.create_task(watch())
    try:
        yield gone
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
