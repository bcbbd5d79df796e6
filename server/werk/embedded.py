"""The embedded PostgreSQL used when no database URL is configured (the ``pgserver`` package
ships the binaries). Its data directory is kept, so jobs survive restarts."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start_embedded(data_dir: Path) -> Any:
    """Start (or attach to) the embedded server in ``data_dir/pgdata``; returns its handle.
    The server stops when the last process using it exits."""
    os.environ.setdefault("XDG_RUNTIME_DIR", str(Path("/tmp") / f"werk-runtime-{os.getuid()}"))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir / "pgdata", cleanup_mode="stop")
    log.info("embedded PostgreSQL running in %s", data_dir / "pgdata")
    return server


def embedded_url(server: Any, database: str = "postgres") -> str:
    uri: str = server.get_uri(database)
    return uri
