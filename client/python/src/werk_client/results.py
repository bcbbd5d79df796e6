"""What a handler's return value becomes: the job's result, when JSON can carry it."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["sendable_result"]

log = logging.getLogger("werk_client.worker")


def sendable_result(value: Any, fields: Mapping[str, Any] | None = None) -> Any:
    """``value`` if it can go to the server as the job's result (JSON), else None: a handler
    may return anything, and only what JSON can carry is sent (a warning names the rest, with
    the job's log ``fields``)."""
    if value is None:
        return None
    try:
        # As the request carries it: UTF-8, so a lone surrogate is refused here, not in the ack.
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        log.warning(
            "the handler's return value is not sent as the result: %s", exc, extra=fields or {}
        )
        return None
    return value
