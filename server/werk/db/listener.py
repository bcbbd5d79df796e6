"""One LISTEN connection per server process, reconnecting by itself after an outage.

Its session is named ``APPLICATION_NAME`` so that the processes can count each other in
pg_stat_activity (a process alone sends no notifications), and it announces itself once it
listens, so the others need not wait for their next count to start notifying."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from werk.db import queries
from werk.db.pool import connect

log = logging.getLogger(__name__)

CHANNEL = "werk_jobs"
APPLICATION_NAME = "werk-listen"


class Listener:
    def __init__(
        self,
        dsn: str,
        on_payload: Callable[[str], None],
        *,
        hello: str,
        on_listening: Callable[[int | None], None],
        retry_every: float,
    ) -> None:
        """``hello`` is sent on the channel each time the LISTEN starts; ``on_listening`` hears
        the connection's backend pid then, and None when it is lost."""
        self._dsn = dsn
        self._on_payload = on_payload
        self._hello = hello
        self._on_listening = on_listening
        self._retry_every = retry_every
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="werk-listen")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _callback(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        self._on_payload(str(payload))

    @staticmethod
    async def _until_closed(conn: asyncpg.Connection) -> None:
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _c: lost.set())
        await lost.wait()

    async def _run(self) -> None:
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await connect(self._dsn, application_name=APPLICATION_NAME)
                await conn.add_listener(CHANNEL, self._callback)
                await queries.notify_queues(conn, [self._hello])
                self._on_listening(conn.get_server_pid())
                await self._until_closed(conn)
                log.warning("LISTEN connection lost; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("LISTEN connect failed: %s", exc)
            finally:
                self._on_listening(None)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 1)
            await asyncio.sleep(self._retry_every)
