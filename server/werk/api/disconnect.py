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
async def disconnection(receive: Receive) -> AsyncIterator[asyncio.Future[None]]:
    """Yields a future that completes when the client disconnects (use after the body was
    read). It is cancelled on leaving, not awaited: the answer goes out without waiting a turn of
    the event loop for the watcher to finish."""

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    gone = asyncio.ensure_future(watch())
    try:
        yield gone
    finally:
        gone.cancel()
