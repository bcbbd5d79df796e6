"""Structured logging for workers: every job line carries jid and jobtype as fields.

The worker logs through the standard ``logging`` module with the fields in ``extra``; these
formatters print them as ``key=value`` pairs (for people) or one JSON object per line (for log
pipelines). Applications with their own logging setup can ignore this module entirely.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "KeyValueFormatter", "configure_logging"]

FIELDS = (
    "wid",
    "jid",
    "jobtype",
    "queue",
    "attempt",
    "duration_ms",
    "errtype",
    "state",
    "count",
)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: getattr(record, k) for k in FIELDS if getattr(record, k, None) is not None}


class KeyValueFormatter(logging.Formatter):
    """``2026-01-01T00:00:00Z INFO werk_client.worker job done jid=... jobtype=...``"""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        parts = [stamp, record.levelname, record.name, record.getMessage()]
        parts += [f"{k}={v}" for k, v in _fields(record).items()]
        text = " ".join(str(p) for p in parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, and the job fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Log to stderr in ``text`` (key=value) or ``json`` form; used by ``werk-worker``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
