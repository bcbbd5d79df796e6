"""A real PgBouncer (Debian's package) in transaction pooling mode, started by the suite in front
of the test PostgreSQL (WERK_TEST_DATABASE_URL's or the embedded one) on a free loopback port.

Its wildcard database entry leads every database name to the same name upstream, so the
per-test databases are reachable through it as they are directly."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from tests.support.server import free_port

INSTALL = "apt-get update && apt-get install -y pgbouncer"


def pgbouncer_binary() -> str | None:
    """Debian installs it in /usr/sbin, which a non-root PATH often leaves out."""
    found = shutil.which("pgbouncer")
    if found:
        return found
    sbin = Path("/usr/sbin/pgbouncer")
    return str(sbin) if sbin.exists() else None


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def _upstream(url: str) -> dict[str, str]:
    """host, port, user and password of a PostgreSQL URL (a host given as ?host=/socket/dir,
    as the embedded server's URL does, included)."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or "127.0.0.1"])[0]
    port = query.get("port", [str(parts.port or 5432)])[0]
    return {
        "host": host,
        "port": port,
        "user": parts.username or "postgres",
        "password": parts.password or "",
    }


class PgBouncer:
    """``pool_size``: server connections per database (default_pool_size): clients beyond it
    wait for a transaction on another client to end."""

    def __init__(self, upstream_url: str, work_dir: Path, *, pool_size: int) -> None:
        self.binary = pgbouncer_binary()
        if self.binary is None:
            raise FileNotFoundError(f"pgbouncer is not installed ({INSTALL})")
        self.upstream = _upstream(upstream_url)
        self.pool_size = pool_size
        self.port = free_port()
        self.dir = work_dir
        self.log_path = work_dir / "pgbouncer.log"
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        user = quote(self.upstream["user"], safe="")
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def _config(self) -> str:
        up = self.upstream
        target = f"host={up['host']} port={up['port']} user={up['user']}"
        if up["password"]:
            target += f" password={up['password']}"
        return "\n".join(
            [
                "[databases]",
                f"* = {target}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                # Clients are not authenticated (a loopback port of a test run); every database
                # logs in upstream as the one user above.
                "auth_type = any",
                "pool_mode = transaction",
                f"default_pool_size = {self.pool_size}",
                "min_pool_size = 0",
                "reserve_pool_size = 0",
                "max_client_conn = 500",
                "max_db_connections = 0",
                "",
            ]
        )

    def _run_as(self) -> str | None:
        """PgBouncer refuses to run as root: it then runs as the owner of the upstream's socket
        directory (the embedded server's, private to that user), else as nobody."""
        if os.geteuid() != 0:
            return None
        host = Path(self.upstream["host"])
        if host.is_absolute() and host.exists():
            return pwd.getpwuid(host.stat().st_uid).pw_name
        return "nobody"

    def start(self, timeout: float = 20) -> PgBouncer:
        assert self.binary is not None
        config = self.dir / "pgbouncer.ini"
        config.write_text(self._config())
        config.chmod(0o644)
        command = [self.binary]
        user = self._run_as()
        if user is not None:
            command += ["-u", user]
        command.append(str(config))
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"pgbouncer not listening in {timeout}s: {self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: immediate shutdown
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
