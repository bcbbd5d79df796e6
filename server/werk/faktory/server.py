"""The FWP listener: accepts TCP connections in the app's event loop, enforces the limits (line
length, connection count, handshake and idle timeouts) and runs one command at a time per
connection through ``Commands``."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections import Counter

from werk.config import Settings
from werk.faktory import protocol
from werk.faktory.commands import Commands, Session, Stats
from werk.faktory.protocol import Challenge, Command, PasswordRejected, ProtocolError
from werk.services.access import FailureLimiter
from werk.services.container import Services
from werk.services.faktory_ops import FaktoryOps

log = logging.getLogger(__name__)

WRITE_TIMEOUT = 30.0
SHUTDOWN_GRACE = 5.0


class FaktoryConfigError(RuntimeError):
    """The FWP listener cannot start as configured."""


class _Connection:
    __slots__ = ("busy", "session", "task")

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task
        self.busy = False
        self.session: Session | None = None  # set once the handshake succeeded


class FaktoryServer:
    def __init__(
        self,
        settings: Settings,
        services: Services,
        ops: FaktoryOps,
        *,
        unavailable: tuple[type[Exception], ...],
    ) -> None:
        """``unavailable``: the exception types that mean the database is away (answered with
        an ``-ERR`` to try again)."""
        self._settings = settings
        self.stats = Stats()
        self._workers: Counter[str] = Counter()  # wid -> open connections that said HELLO with it
        self._commands = Commands(
            settings,
            services,
            ops,
            self.stats,
            known_worker=lambda wid: wid in self._workers,
            unavailable=unavailable,
        )
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], _Connection] = {}
        self._closing = False
        # Wrong passwords per client address, as for bearer tokens over HTTP.
        self._failures = FailureLimiter(settings.auth_failures_per_minute)

    @property
    def host(self) -> str:
        return self._settings.faktory_host or self._settings.host

    @property
    def port(self) -> int | None:
        """The bound port (useful when configured as an ephemeral one), None when not serving."""
        if self._server is None or not self._server.sockets:
            return None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def check(self) -> str | None:
        """Why FWP must not serve as configured (None: it may)."""
        s = self._settings
        if s.faktory_password:
            return None
        if getattr(s, "tokens", None) and not getattr(s, "insecure", False):
            return (
                "bearer tokens are configured, but FWP cannot check a token (its handshake needs "
                "a secret the server knows, and Werk keeps only token hashes): set "
                "WERK_FAKTORY_PASSWORD for Faktory clients, or WERK_FAKTORY_PORT=0"
            )
        if not _is_loopback(self.host) and not getattr(s, "insecure", False):
            return (
                f"refusing to serve FWP on {self.host} without a password: set "
                "WERK_FAKTORY_PASSWORD, bind 127.0.0.1, or WERK_FAKTORY_PORT=0"
            )
        return None

    async def start(self) -> bool:
        """Binds and starts accepting. Returns False when FWP stays off. A port or problem the
        operator chose explicitly fails the start; the default port only logs a warning."""
        s = self._settings
        if s.faktory_port == 0:
            return False
        explicit = "faktory_port" in s.model_fields_set
        problem = self.check()
        if problem is None:
            try:
                self._server = await asyncio.start_server(
                    self._accept,
                    host=self.host,
                    port=s.faktory_port,
                    limit=s.faktory_max_line_bytes,
                    # Several `werk serve --workers N` processes share the port.
                    reuse_port=s.workers > 1,
                )
            except OSError as exc:
                problem = f"cannot listen for FWP on {self.host}:{s.faktory_port}: {exc}"
        if problem is not None:
            if explicit:
                raise FaktoryConfigError(problem)
            log.warning("Faktory protocol (FWP) is off: %s", problem)
            return False
        log.info(
            "Faktory protocol (FWP) listening on %s:%s%s",
            self.host,
            self.port,
            " (password required)" if s.faktory_password else "",
        )
        return True

    async def close(self) -> None:
        """Stops accepting; idle connections close now, busy ones after their current command
        (at most SHUTDOWN_GRACE seconds)."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections.values()):
            if not conn.busy:
                conn.task.cancel()
        tasks = list(self._connections)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)
            self._server = None

    # -- connections -----------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._closing or len(self._connections) >= self._settings.faktory_max_connections:
            with contextlib.suppress(Exception):
                writer.write(
                    protocol.error(
                        "too many connections" if not self._closing else "the server is stopping"
                    )
                )
                await asyncio.wait_for(writer.drain(), 1)
            await _close(writer)
            return
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if await self._refused(writer, client):
            await _close(writer)
            return
        conn = _Connection(task)
        self._connections[task] = conn
        self.stats.connections += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await self._serve(reader, writer, conn, client)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("FWP connection failed")
        finally:
            del self._connections[task]
            self.stats.connections -= 1
            session = conn.session
            if session is not None and session.wid is not None:
                self._workers[session.wid] -= 1
                if self._workers[session.wid] <= 0:
                    del self._workers[session.wid]
            await _close(writer)

    async def _refused(self, writer: asyncio.StreamWriter, client: str) -> bool:
        """Whether the client is blocked for its wrong passwords (then told so)."""
        wait = self._failures.retry_after(client)
        if wait is None:
            return False
        with contextlib.suppress(Exception):
            writer.write(protocol.error(f"too many wrong passwords; try again in {wait:.0f} s"))
            await asyncio.wait_for(writer.drain(), 1)
        return True

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        conn: _Connection,
        client: str,
    ) -> None:
        s = self._settings
        challenge = Challenge.new(required=bool(s.faktory_password))
        await _send(writer, challenge.greeting())

        # The handshake, within its deadline.
        command: Command | None = None
        try:
            async with asyncio.timeout(s.faktory_handshake_timeout):
                while command is None:
                    line = await self._read_line(reader, writer)
                    if line is None:
                        return
                    try:
                        command = protocol.parse_line(line)
                    except ProtocolError as exc:
                        await _send(writer, protocol.error(exc.message))
                        return
                conn.busy = True
                # Checked again here: connections opened together all passed the check at accept.
                # From this check to a failure recorded nothing yields to other connections.
                if challenge.salt is not None and await self._refused(writer, client):
                    return
                session = await self._commands.hello(command, challenge)
        except TimeoutError:
            await _send(
                writer,
                protocol.error(
                    f"handshake timeout: send HELLO within {s.faktory_handshake_timeout:g} s"
                ),
            )
            return
        except ProtocolError as exc:
            if isinstance(exc, PasswordRejected):
                self._failures.record(client)
            await _send(writer, protocol.error(exc.message))
            return
        finally:
            conn.busy = False
        conn.session = session
        session.peer_gone = lambda: _peer_gone(reader, writer)
        if session.wid is not None:
            self._workers[session.wid] += 1
        await _send(writer, protocol.OK)

        while not self._closing:
            try:
                async with asyncio.timeout(s.faktory_idle_timeout):
                    line = await self._read_line(reader, writer)
            except TimeoutError:
                log.debug("closing an FWP connection idle for %s s", s.faktory_idle_timeout)
                return
            if line is None:
                return
            conn.busy = True
            try:
                try:
                    command = protocol.parse_line(line)
                except ProtocolError as exc:
                    await _send(writer, protocol.error(exc.message))
                    continue
                if command is None:
                    continue
                if command.verb == "END":
                    return
                try:
                    reply = await self._commands.run(session, command)
                except ProtocolError as exc:
                    await _send(writer, protocol.error(exc.message))
                    if exc.close:
                        return
                    continue
                await _send(writer, reply)
            finally:
                conn.busy = False

    async def _read_line(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bytes | None:
        """The next line without its ending; None at EOF. A line over the limit is answered
        with an error and ends the connection (what follows cannot be framed reliably)."""
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError:
            await _send(
                writer,
                protocol.error(
                    "line too long: commands are limited to "
                    f"{self._settings.faktory_max_line_bytes} bytes (WERK_FAKTORY_MAX_LINE_BYTES)"
                ),
            )
            return None
        return line.rstrip(b"\r\n")


def _peer_gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Whether the client has left: a close shows as EOF, a reset as the reader's error (the
    transport closes at once, with no EOF)."""
    return reader.at_eof() or reader.exception() is not None or writer.is_closing()


async def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    if writer.is_closing():
        # Some event loops refuse a write to a closed transport; the client has left either way.
        raise ConnectionResetError("the client has left")
    writer.write(data)
    await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 1)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
