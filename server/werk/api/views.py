"""Renders stored rows on the wire. orjson does the encoding (datetimes as RFC 3339)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def job_view(r: Mapping[str, Any]) -> dict[str, Any]:
    failure = None
    if r["failed_at"] is not None:
        failure = {
            "retry_count": r["retry_count"],
            "remaining": max(r["retry"] - r["retry_count"], 0),
            "failed_at": r["failed_at"],
            "next_at": r["run_at"] if r["state"] == "scheduled" else None,
            "errtype": r["errtype"],
            "message": r["message"],
            "backtrace": r["error_backtrace"] or [],
        }
    return {
        "jid": r["jid"],
        "jobtype": r["jobtype"],
        "args": r["args"],
        "queue": r["queue"],
        "priority": r["priority"],
        "reserve_for": r["reserve_for"],
        "retry": r["retry"],
        "backtrace": r["backtrace"],
        "custom": r["custom"],
        "at": r["at"],
        "state": r["state"],
        "created_at": r["created_at"],
        "enqueued_at": r["enqueued_at"],
        "attempt": r["attempt"],
        "progress": r["progress"],
        "failure": failure,
        "lease": r["lease"],
        "lease_expires_at": r["lease_expires_at"],
        "wid": r["wid"],
    }
