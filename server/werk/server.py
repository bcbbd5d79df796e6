"""Runs the app under uvicorn: one process, or N worker processes sharing one socket."""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import uvicorn

from werk.app import begin_shutdown, create_app
from werk.config import Settings
from werk.connections import ConnectionLimits, LimitedConfig, ensure_file_limit

log = logging.getLogger(__name__)

# Allocations between young-generation collections (CPython's default is 700). A batch request
# allocates tens of thousands of short-lived containers, and at the default the collector ran
# every few hundred of them, each run also walking what survived. Nothing the server keeps
# depends on prompt collection of cycles; they are still collected, later.
GC_YOUNG_THRESHOLD = 50_000

# How long an idle keep-alive connection stays open. uvicorn's default, 5 s, is the idle expiry of
# httpx's and other clients' pools: a client reusing a connection just as the server closes it
# gets no answer (a ReadError in httpx, and the POST is not retried). The server must outlast
# the clients' expiries; 75 s is nginx's default.
KEEP_ALIVE_SECONDS = 75


class WerkServer(uvicorn.Server):
    """Builds the app inside the serving process (so N processes each own their pool) and ends
    waiting long polls as soon as a stop is requested, so a graceful stop does not wait out
    every 30-second poll."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        super().__init__(
            LimitedConfig(
                ConnectionLimits.of(settings),
                app="werk:placeholder",
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level,
                timeout_graceful_shutdown=30,
                timeout_keep_alive=KEEP_ALIVE_SECONDS,
                access_log=settings.log_level == "debug",
                server_header=False,
                # X-Forwarded-* count only from WERK_TRUSTED_PROXIES (werk.http.proxies), not from
                # every loopback client as uvicorn's default would have it.
                proxy_headers=False,
            )
        )

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self.app = create_app(self.settings)
        self.config.app = self.app
        # What start-up built (modules, the app, its models) lives as long as the process; frozen,
        # the older generations' collections no longer walk it.
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Like uvicorn's, but a graceful stop ends with exit status 0 instead of re-raising the
        signal, so supervisors see a clean shutdown."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        begin_shutdown(self.app)


def serve(settings: Settings) -> None:
    ensure_file_limit(settings)
    if settings.workers == 1:
        WerkServer(settings).run()
        return
    _serve_processes(settings)


def _serve_processes(settings: Settings) -> None:
    server = WerkServer(settings)
    sock = server.config.bind_socket()
    processes: list[Any] = []
    stopping = False

    def stop(sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for p in processes:
            if p.is_alive():
                p.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in range(settings.workers):
        processes.append(_start_process(settings, sock))
    # Replace a worker process that died unexpectedly; leave when told to stop.
    while not stopping:
        time.sleep(0.5)
        for i, p in enumerate(processes):
            if not p.is_alive() and not stopping:
                log.warning("server process %s exited (%s); starting another", p.pid, p.exitcode)
                processes[i] = _start_process(settings, sock)
    for p in processes:
        p.join(40)
    sock.close()


# Server processes are spawned, not forked: each builds its own event loop, pool and app from the
# settings, and receives the listening socket the parent bound.
multiprocessing.allow_connection_pickling()
_SPAWN = multiprocessing.get_context("spawn")


def _start_process(settings: Settings, sock: socket.socket) -> Any:
    process = _SPAWN.Process(target=_run_process, args=(settings, sock))
    process.start()
    return process


def _run_process(settings: Settings, sock: socket.socket) -> None:
    with contextlib.suppress(KeyboardInterrupt):  # the parent asked it to stop
        WerkServer(settings).run(sockets=[sock])
