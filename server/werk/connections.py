"""Bounds on HTTP connections, so clients that connect and send nothing, or send a request a byte
at a time, cannot hold the server's file descriptors, and clients that send long heads or many
pipelined requests cannot fill its memory: a deadline for each request's head and body, a cap on
open connections per process, a bound on a request's head and on the requests read ahead.

uvicorn bounds only the idle time between requests (keep-alive); a connection that never sends a
whole request stays open, and its ``limit_concurrency`` answers 503 once in-flight requests reach
the limit, which would also refuse workers' long polls. Its httptools protocol keeps a head in
memory however long it grows, and parses every request one read holds. So the limits live in a
subclass of that protocol (the one uvicorn picks itself when httptools is installed)."""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from werk.api.problems import problem_json
from werk.coalescing import CoalescingTransport
from werk.config import Settings
from werk.errors import HeaderTooLarge, MalformedRequest, RequestTimeout, WerkError

log = logging.getLogger(__name__)

# Descriptors a server process needs besides client connections: listening sockets, the database
# pools and LISTEN connection, the event loop's own, log files.
RESERVED_FILES = 64
REFUSAL_LOG_INTERVAL = 10.0
# Requests read ahead of the one being answered, at most, on one connection (HTTP/1.1
# pipelining). uvicorn parses all that one read holds, and each parsed request is held until
# answered: without a bound, one read of tiny requests holds thousands of them.
MAX_PIPELINED = 64
# A request line's bytes besides its method and target: two spaces, "HTTP/1.1" and its CRLF;
# with the CRLF that ends the head.
REQUEST_LINE_FRAME = 14


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float
    body_timeout: float
    max_connections: int
    max_header_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> ConnectionLimits:
        return cls(
            settings.header_timeout,
            settings.body_timeout,
            settings.max_connections,
            settings.max_header_bytes,
        )


class LimitedConfig(uvicorn.Config):
    """uvicorn's configuration with the limits attached. It is pickled into each process of
    ``--workers N``, so the protocol class must be importable by name, not built per setting."""

    def __init__(self, limits: ConnectionLimits, **kwargs: Any) -> None:
        super().__init__(http=LimitedHttpProtocol, **kwargs)
        self.limits = limits


class LimitedHttpProtocol(HttpToolsProtocol):
    """One deadline per connection: while a request is being read, the time by which its head (or
    its body) must be complete; None between requests and while the app answers, where uvicorn's
    keep-alive timer and the app's own waits (long polls) govern. A single timer per connection
    checks it, re-armed only when it fires or a deadline comes earlier than it.

    A head over its bound, a request the parser refuses, or one more request than may be read
    ahead stops the reading (_stop): the requests read before are answered, then the refusal,
    and the connection is closed.

    Its answers are written through a CoalescingTransport (werk.coalescing), so that each goes
    out in one write."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        assert isinstance(config, LimitedConfig)
        self.limits = config.limits
        self.deadline: float | None = None
        # What the deadline is for; "connect": nothing received yet.
        self.reading: Literal["connect", "head", "body"] | None = None
        self.watch: asyncio.TimerHandle | None = None
        # Bytes of the request head read so far, and whether a head was completed in the data
        # being parsed.
        self.head_bytes = 0
        self.head_completed = False
        # No further request is read (_stop), and the answer owed once those before are.
        self.stopped = False
        self.refusal: WerkError | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            _log_refusal(self.limits.max_connections)
            self.transport = transport  # connection_lost expects it
            transport.close()
            return
        super().connection_made(CoalescingTransport(transport, self.loop))
        self.reading = "connect"
        self._read_by(self.loop.time() + self.limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.watch is not None:
            self.watch.cancel()
            self.watch = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.stopped:
            return
        began_in_head = self.reading != "body"
        self.head_completed = False
        super().data_received(data)
        # The parser keeps a head in memory until it is complete: a head still incomplete is
        # bounded as it arrives, counting only data that was head from end to end (a head
        # begun after a body in the same data is bounded from its next data on).
        if began_in_head and self.reading == "head" and not self.head_completed:
            self.head_bytes += len(data)
            if self.head_bytes > self.limits.max_header_bytes:
                self._stop(self._head_too_large())

    def send_400_response(self, msg: str) -> None:
        """What the parser refused, or a refusal raised from its callback (already stopped)."""
        if self.stopped:
            return
        error = MalformedRequest(
            "the server could not parse the request: a bad request line, header or chunk"
        )
        if self.reading == "body":
            # The request being read is broken: its app, if it runs, sees the close.
            if self.cycle is None or not self.cycle.response_started:
                self.transport.write(_answer(error))
            self.transport.close()
        else:
            self._stop(error)

    def _stop(self, refusal: WerkError | None) -> None:
        """Reads no further request; the requests read before are answered, then ``refusal``
        (problem+json, where uvicorn's own answers are text/plain), then the connection is
        closed."""
        self.stopped = True
        self.refusal = refusal
        self.deadline = None  # the requests read before may take their time (long polls)
        self.flow.pause_reading()
        self._close_when_answered()

    def _close_when_answered(self) -> None:
        answered = self.cycle is None or self.cycle.response_complete
        if self.pipeline or not answered or self.transport.is_closing():
            return
        if self.refusal is not None:
            self.transport.write(_answer(self.refusal))
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.stopped:
            self.flow.pause_reading()
            self._close_when_answered()

    def _head_too_large(self) -> HeaderTooLarge:
        limit = self.limits.max_header_bytes
        return HeaderTooLarge(f"the request line and headers are over {limit} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.reading is None:  # a kept-alive connection's next request
            self._read_by(self.loop.time() + self.limits.header_timeout)
        self.reading = "head"
        self.head_bytes = 0

    def on_headers_complete(self) -> None:
        self.head_completed = True
        size = len(self.parser.get_method()) + len(self.url) + REQUEST_LINE_FRAME
        for name, value in self.headers:
            size += len(name) + len(value) + 4  # ": " and CRLF
        if size > self.limits.max_header_bytes:
            self._stop(self._head_too_large())
        elif len(self.pipeline) >= MAX_PIPELINED:
            # Closed once those read are answered: the client sends the rest again (RFC 9112,
            # 9.3.2).
            self._stop(None)
        if self.stopped:
            # The parser stops at an exception from its callback (uvicorn then calls
            # send_400_response).
            raise ConnectionAbortedError("no further request is read on this connection")
        super().on_headers_complete()
        self.reading = "body"
        self._read_by(self.loop.time() + self.limits.body_timeout)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.deadline = None
        self.reading = None

    def _read_by(self, deadline: float) -> None:
        self.deadline = deadline
        if self.watch is None or self.watch.when() > deadline:
            if self.watch is not None:
                self.watch.cancel()
            self.watch = self.loop.call_at(deadline, self._check)

    def _check(self) -> None:
        self.watch = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return
        now = self.loop.time()
        if self.deadline is None:
            # Between requests or while the app answers: look again after the shortest time a
            # deadline set from now could take.
            recheck = min(self.limits.header_timeout, self.limits.body_timeout)
            self.watch = self.loop.call_at(now + recheck, self._check)
        elif now < self.deadline:
            self.watch = self.loop.call_at(self.deadline, self._check)
        else:
            self._time_out()

    def _time_out(self) -> None:
        """A connection that never sent a byte is closed; a request cut short is answered 408
        first, unless an answer is already under way on the connection. The app, if it waits for
        the rest of a body, then sees the client disconnect (its answer goes nowhere)."""
        cycle = self.cycle
        if self.reading == "head" and (cycle is None or cycle.response_complete):
            self.transport.write(_timeout_answer("head", self.limits.header_timeout))
        elif self.reading == "body" and not self.pipeline and not cycle.response_started:
            self.transport.write(_timeout_answer("body", self.limits.body_timeout))
        self.transport.close()


def _timeout_answer(part: str, seconds: float) -> bytes:
    setting = "WERK_BODY_TIMEOUT" if part == "body" else "WERK_HEADER_TIMEOUT"
    return _answer(
        RequestTimeout(f"the request {part} did not arrive within {seconds:g} s ({setting})")
    )


def _answer(error: WerkError) -> bytes:
    """A whole answer written by the HTTP layer itself, after which it closes the connection."""
    body = problem_json(error.status, error.code, error.title, error.detail)
    head = (
        f"HTTP/1.1 {error.status} {HTTPStatus(error.status).phrase}\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


_last_refusal_log = 0.0


def _log_refusal(cap: int) -> None:
    """At most one line per interval: a flood of refusals must not become a flood of logs."""
    global _last_refusal_log
    now = time.monotonic()
    if now - _last_refusal_log >= REFUSAL_LOG_INTERVAL:
        _last_refusal_log = now
        log.warning("%d HTTP connections open (WERK_MAX_CONNECTIONS): closing new ones", cap)


def ensure_file_limit(settings: Settings) -> None:
    """Raises the process's open-file limit (inherited by ``--workers`` processes) to what the
    connection caps need, within the hard limit; warns when even that is too low, because then
    descriptors run out before the caps refuse anything."""
    needed = settings.max_connections + RESERVED_FILES + settings.pool_max_size
    needed += settings.admin_pool_max_size
    if settings.faktory_port:
        needed += settings.faktory_max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        log.warning(
            "the open-file limit (%d) is below the %d that WERK_MAX_CONNECTIONS and "
            "WERK_FAKTORY_MAX_CONNECTIONS need; raise it (ulimit -n) or lower them",
            target,
            needed,
        )
