"""HTTP/1.1 keep-alive connections to one Werk server, blocking (``SyncPool``) and asyncio
(``AsyncPool``).

The clients speak to one origin, send JSON and read JSON, so they need a small part of HTTP:
a request line, a few fixed headers, and answers framed by Content-Length or chunked (or, from
an HTTP/1.0 proxy, by the connection's close). General HTTP libraries spend most of a request's
client CPU on what a job client never uses (URL objects, header classes, connection-pool
bookkeeping for many origins, content decoders), and a Werk request is small enough that this
overhead was most of what a producer or worker paid per job.

Connections are kept for ``keepalive_expiry`` seconds of idleness (less than any sensible
server or load-balancer idle timeout), and one that sat idle for a while is checked for a close
from the server before it is used again, so a request rarely meets a connection the server is
closing. Failures are typed by what they say about the request: ``ConnectError`` (it was
never sent: retrying is always safe) and ``ReadError`` (it may have been processed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = [
    "AsyncPool",
    "ConnectError",
    "ConnectTimeout",
    "Origin",
    "ProtocolError",
    "ReadError",
    "ReadTimeout",
    "Response",
    "SyncPool",
    "TransportError",
]

KEEPALIVE_EXPIRY = 5.0
# A pooled connection idle for longer than this is checked for a close from the server first.
_CHECK_AFTER = 1.0
_MAX_HEAD = 65536


class TransportError(Exception):
    """No HTTP answer: the server could not be reached, or the connection failed."""


class ConnectError(TransportError):
    """The connection could not be made: the request was not sent."""


class ConnectTimeout(ConnectError):
    """Connecting took longer than the timeout: the request was not sent."""


class ReadError(TransportError):
    """The connection failed after the request was (perhaps partly) sent."""


class ReadTimeout(ReadError):
    """No complete answer within the timeout."""


class ProtocolError(ReadError):
    """The answer is not HTTP/1.x as this client understands it."""


class Response:
    """One answer: status, body, and the head (its headers are parsed only if read)."""

    __slots__ = ("_head", "_headers", "_reason", "content", "status_code")

    def __init__(
        self,
        status_code: int,
        content: bytes,
        head: bytes = b"",
        headers: Mapping[str, str] | None = None,
        reason: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.content = content
        self._head = head
        self._headers = headers
        self._reason = reason

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def reason_phrase(self) -> str:
        if self._reason is not None:
            return self._reason
        line = self._head.split(b"\r\n", 1)[0]
        return line[13:].decode("latin-1")

    @property
    def headers(self) -> Mapping[str, str]:
        """Header names in lower case; repeated headers joined with commas."""
        if self._headers is None:
            self._headers = _header_fields(self._head)
        return self._headers


def _header_fields(head: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        key = name.strip().lower().decode("latin-1")
        text = value.strip().decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: scheme, host, port, and a path prefix (a server behind a proxy)."""

    scheme: str
    host: str
    port: int
    prefix: str
    host_header: bytes

    @classmethod
    def parse(cls, url: str) -> Origin:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        port = parts.port or (443 if scheme == "https" else 80)
        netloc = parts.netloc.rpartition("@")[2]
        return cls(
            scheme=scheme,
            host=parts.hostname,
            port=port,
            prefix=parts.path.rstrip("/"),
            host_header=f"Host: {netloc if netloc.isascii() else _idna(netloc)}\r\n".encode(),
        )


def _idna(netloc: str) -> str:
    host, colon, port = netloc.rpartition(":") if not netloc.endswith("]") else (netloc, "", "")
    if not colon or not port.isdigit():
        host, colon, port = netloc, "", ""
    return host.encode("idna").decode("ascii") + colon + port


def default_ssl_context() -> ssl.SSLContext:
    """Certificates from ``SSL_CERT_FILE``/``SSL_CERT_DIR`` if set, else certifi's bundle when
    installed (as httpx did), else the system's trust store."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile is None and capath is None:
        with contextlib.suppress(ImportError):
            import certifi

            cafile = certifi.where()
    context = ssl.create_default_context(cafile=cafile, capath=capath)
    context.set_alpn_protocols(["http/1.1"])
    return context


def encode_head(
    method: str, target: str, origin: Origin, fixed: bytes, headers: Mapping[str, str] | None
) -> bytes:
    """The request line and headers, ending with the blank line (Content-Length follows from
    the caller when there is a body)."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()) if headers else ""
    return (
        f"{method} {origin.prefix}{target} HTTP/1.1\r\n".encode()
        + origin.host_header
        + (fixed + extra.encode("latin-1") if extra else fixed)
    )


def request_bytes(head: bytes, body: bytes | None) -> bytes:
    if body is None:
        return head + b"\r\n"
    return b"%bContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b" % (
        head,
        len(body),
        body,
    )


def _header(lower: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (given as b"\r\nname:") in a lower-cased head."""
    at = lower.find(name)
    if at < 0:
        return None
    start = at + len(name)
    end = lower.find(b"\r\n", start)
    return lower[start : end if end >= 0 else len(lower)].strip()


def _framing(head: bytes) -> tuple[int, int, bool, bool]:
    """Status, Content-Length (-1: none), chunked, and whether the server closes after it."""
    if not head.startswith(b"HTTP/1.") or len(head) < 12:
        raise ProtocolError(f"not an HTTP/1.x answer: {head[:80]!r}")
    try:
        status = int(head[9:12])
    except ValueError as exc:
        raise ProtocolError(f"bad status line: {head[:80]!r}") from exc
    lower = head.lower()
    length = -1
    value = _header(lower, b"\r\ncontent-length:")
    if value is not None:
        try:
            length = int(value)
        except ValueError as exc:
            raise ProtocolError("bad Content-Length") from exc
    encoding = _header(lower, b"\r\ntransfer-encoding:")
    chunked = encoding is not None and b"chunked" in encoding
    connection = _header(lower, b"\r\nconnection:") or b""
    close = b"close" in connection or (head[7:8] == b"0" and b"keep-alive" not in connection)
    return status, length, chunked, close


def take_answer(buf: bytearray, *, eof: bool) -> tuple[Response, bool] | None:
    """The first complete answer in ``buf`` (removed from it) and whether the connection may
    serve another request; None while incomplete. ``eof``: the server closed the connection,
    which completes an answer framed by the close."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise ProtocolError("answer head too long")
            return None
        head = bytes(buf[:end])
        status, length, chunked, close = _framing(head)
        start = end + 4
        if 100 <= status < 200:
            del buf[:start]  # interim answers carry no body
            continue
        break
    keep = not close
    if status in (204, 304):
        body = b""
        used = start
    elif chunked:
        parsed = _chunked(buf, start)
        if parsed is None:
            return None
        body, used = parsed
    elif length >= 0:
        used = start + length
        if len(buf) < used:
            return None
        body = bytes(buf[start:used])
    else:
        if not eof:
            return None
        used = len(buf)
        body = bytes(buf[start:])
        keep = False
    del buf[:used]
    return Response(status, body, head), keep


class _SyncConnection:
    __slots__ = ("buf", "idle_since", "sock", "timeout")

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.timeout = timeout
        self.idle_since = 0.0

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def alive(self) -> bool:
        """False if the server closed the connection (or sent something unasked) while idle."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        if not readable:
            return True
        if isinstance(self.sock, ssl.SSLSocket):
            # TLS 1.3 session tickets arrive after the handshake: readable, yet alive.
            previous = self.sock.gettimeout()
            self.sock.settimeout(0)
            try:
                self.sock.recv(1)  # the close, or bytes nobody asked for: either way, done
                return False
            except (ssl.SSLWantReadError, BlockingIOError):
                return True
            except OSError:
                return False
            finally:
                self.sock.settimeout(previous)
        return False

    def set_timeout(self, timeout: float) -> None:
        if timeout == self.timeout:
            return
        self.timeout = timeout
        if isinstance(self.sock, ssl.SSLSocket):
            self.sock.settimeout(timeout)
        else:
            _set_kernel_timeout(self.sock, timeout)

    def exchange(self, data: bytes, timeout: float) -> tuple[Response, bool]:
        """Send one request, read its answer; the flag says whether the connection stays."""
        self.set_timeout(timeout)
        sock = self.sock
        buf = self.buf
        try:
            sock.sendall(data)
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    answer = take_answer(buf, eof=True)
                    if answer is None:
                        raise ReadError("server closed the connection without a complete answer")
                    return answer[0], False
                buf += chunk
                answer = take_answer(buf, eof=False)
                if answer is not None:
                    return answer
        except BlockingIOError as exc:  # SO_RCVTIMEO / SO_SNDTIMEO ran out
            raise ReadTimeout(f"no answer within {timeout:g}s") from exc


def _set_kernel_timeout(sock: socket.socket, timeout: float) -> None:
    """A blocking socket whose reads and writes give up after ``timeout`` (EAGAIN): unlike
    Python's socket timeouts, this costs no poll() before every call."""
    sock.settimeout(None)
    seconds = int(timeout)
    value = struct.pack("ll", seconds, int((timeout - seconds) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


@dataclass
class SyncPool:
    """Blocking keep-alive connections to one origin; safe to share between threads."""

    origin: Origin
    connect_timeout: float
    max_idle: int = 20
    keepalive_expiry: float = KEEPALIVE_EXPIRY
    ssl_context: ssl.SSLContext | None = None
    max_connections: int | None = 100
    _idle: list[_SyncConnection] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _slots: threading.Semaphore | None = None
    _closed: bool = False

    def __post_init__(self) -> None:
        if self.max_connections is not None:
            self._slots = threading.Semaphore(self.max_connections)

    def _connect(self, timeout: float) -> _SyncConnection:
        origin = self.origin
        try:
            sock = socket.create_connection(
                (origin.host, origin.port), timeout=min(timeout, self.connect_timeout)
            )
        except TimeoutError as exc:
            raise ConnectTimeout(f"connecting to {origin.host}:{origin.port} timed out") from exc
        except OSError as exc:
            raise ConnectError(f"{origin.host}:{origin.port}: {exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if origin.scheme == "https":
                if self.ssl_context is None:
                    self.ssl_context = default_ssl_context()
                sock = self.ssl_context.wrap_socket(sock, server_hostname=origin.host)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise ConnectError(f"TLS with {origin.host}:{origin.port}: {exc}") from exc
        conn = _SyncConnection(sock, -1.0)
        conn.set_timeout(timeout)
        return conn

    def _take(self) -> _SyncConnection | None:
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            idle = now - conn.idle_since
            if idle < _CHECK_AFTER or (idle < self.keepalive_expiry and conn.alive()):
                return conn
            conn.close()

    def request(self, data: bytes, timeout: float) -> Response:
        """Send ``data`` (a whole request) and return the answer, within ``timeout`` seconds
        (and as long again for a connection to be free, with ``max_connections`` in use)."""
        if self._closed:
            raise ConnectError("the client is closed")
        slots = self._slots
        if slots is None:
            return self._request(data, timeout)
        if not slots.acquire(timeout=timeout):
            raise ConnectTimeout(f"no connection free within {timeout:g}s")
        try:
            return self._request(data, timeout)
        finally:
            slots.release()

    def _request(self, data: bytes, timeout: float) -> Response:
        conn = self._take() or self._connect(timeout)
        try:
            response, keep = conn.exchange(data, timeout)
        except TimeoutError as exc:
            conn.close()
            raise ReadTimeout(f"no answer within {timeout:g}s") from exc
        except TransportError:
            conn.close()
            raise
        except (OSError, ValueError) as exc:
            conn.close()
            raise ReadError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        if keep and not self._closed:
            conn.idle_since = time.monotonic()
            with self._lock:
                if len(self._idle) < self.max_idle:
                    self._idle.append(conn)
                    return response
        conn.close()
        return response

    def close(self) -> None:
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


# -- asyncio ----------------------------------------------------------------------------------


class _AsyncConnection(asyncio.Protocol):
    """One connection; at most one request in flight on it (no pipelining)."""

    __slots__ = ("_buf", "_waiter", "closed", "got_bytes", "idle_since", "transport")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._waiter: asyncio.Future[tuple[Response, bool]] | None = None
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            try:
                # An answer framed by the close (no length given) is complete now.
                self._parse(eof=True)
            except TransportError as error:
                waiter.set_exception(error)
                return
            if not waiter.done():
                waiter.set_exception(
                    ReadError(
                        f"connection lost: {exc}"
                        if exc
                        else "server closed the connection without a complete answer"
                    )
                )

    def eof_received(self) -> bool | None:
        return None  # close our side too; connection_lost follows

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._waiter is not None:
            try:
                self._parse(eof=False)
            except TransportError as error:
                if not self._waiter.done():
                    self._waiter.set_exception(error)
                self.close()
        elif not self.closed:
            self.close()  # nothing was asked: the connection cannot be trusted any more

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, data: bytes) -> asyncio.Future[tuple[Response, bool]]:
        assert self.transport is not None
        waiter: asyncio.Future[tuple[Response, bool]] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        self.transport.write(data)
        return waiter

    def _parse(self, *, eof: bool) -> None:
        answer = take_answer(self._buf, eof=eof)
        if answer is None:
            return
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(answer)


def _chunked(buf: bytearray, pos: int) -> tuple[bytes, int] | None:
    """A complete chunked body starting at ``pos``, and where it ends; None if incomplete."""
    chunks: list[bytes] = []
    while True:
        nl = buf.find(b"\r\n", pos)
        if nl < 0:
            return None
        try:
            size = int(bytes(buf[pos:nl]).split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise ProtocolError("bad chunk size line") from exc
        if size == 0:
            end = buf.find(b"\r\n\r\n", nl)  # the end of the (usually empty) trailer section
            if end < 0:
                return None
            return b"".join(chunks), end + 4
        if len(buf) < nl + 2 + size + 2:
            return None
        chunks.append(bytes(buf[nl + 2 : nl + 2 + size]))
        pos = nl + 2 + size + 2


@dataclass
class AsyncPool:
    """Asyncio keep-alive connections to one origin, for the loop it is first used on."""

    origin: Origin
    connect_timeout: float
    max_idle: int = 20
    keepalive_expiry: float = KEEPALIVE_EXPIRY
    ssl_context: ssl.SSLContext | None = None
    max_connections: int | None = 100
    _idle: list[_AsyncConnection] = field(default_factory=list)
    _slots: asyncio.Semaphore | None = None
    _closed: bool = False

    async def _connect(self, within: float) -> _AsyncConnection:
        origin = self.origin
        loop = asyncio.get_running_loop()
        tls: ssl.SSLContext | None = None
        if origin.scheme == "https":
            if self.ssl_context is None:
                self.ssl_context = default_ssl_context()
            tls = self.ssl_context
        try:
            async with asyncio.timeout(min(within, self.connect_timeout)):
                _, conn = await loop.create_connection(
                    _AsyncConnection,
                    origin.host,
                    origin.port,
                    ssl=tls,
                    server_hostname=origin.host if tls is not None else None,
                )
        except TimeoutError as exc:
            raise ConnectTimeout(f"connecting to {origin.host}:{origin.port} timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(f"{origin.host}:{origin.port}: {exc}") from exc
        return conn

    def _take(self) -> _AsyncConnection | None:
        now = time.monotonic()
        idle = self._idle
        while idle:
            conn = idle.pop()
            transport = conn.transport
            if (
                not conn.closed
                and transport is not None
                and not transport.is_closing()
                and now - conn.idle_since < self.keepalive_expiry
            ):
                return conn
            conn.close()
        return None

    async def request(self, data: bytes, within: float) -> Response:
        """Send ``data`` (a whole request) and return the answer, within ``within`` seconds."""
        if self._closed:
            raise ConnectError("the client is closed")
        if self.max_connections is None:
            return await self._request(data, within)
        slots = self._slots
        if slots is None:
            slots = self._slots = asyncio.Semaphore(self.max_connections)
        if slots.locked():
            try:
                async with asyncio.timeout(within):
                    await slots.acquire()
            except TimeoutError as exc:
                raise ConnectTimeout(f"no connection free within {within:g}s") from exc
        else:
            await slots.acquire()
        try:
            return await self._request(data, within)
        finally:
            slots.release()

    async def _request(self, data: bytes, within: float) -> Response:
        conn = self._take() or await self._connect(within)
        waiter = conn.send(data)
        timer = asyncio.get_running_loop().call_later(within, _expire, waiter, within)
        try:
            response, keep = await waiter
        except BaseException:
            # Cancelled, timed out or failed mid-answer: the connection's state is unknown.
            conn.close()
            raise
        finally:
            timer.cancel()
        if keep and not conn.closed and not self._closed and len(self._idle) < self.max_idle:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()
        return response

    def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _expire(waiter: asyncio.Future[tuple[Response, bool]], timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout(f"no answer within {timeout:g}s"))
