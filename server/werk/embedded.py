"""The embedded PostgreSQL used when no database URL is configured (the ``pgserver`` package
ships the binaries). Its data directory is kept, so jobs survive restarts."""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start_embedded(data_dir: Path) -> Any:
    """Start (or attach to) the embedded server in ``data_dir/pgdata``; returns its handle.
    The server stops when the last process using it exits."""
    runtime = Path(tempfile.gettempdir()) / f"werk-runtime-{os.getuid()}"
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(  # type: ignore[attr-defined]
        data_dir / "pgdata", cleanup_mode="stop"
    )
    log.info("embedded PostgreSQL running in %s", data_dir / "pgdata")
    return server


def embedded_url(server: Any, database: str = "postgres") -> str:
    uri: str = server.get_uri(database)
    return uri
