"""Exceptions a handler raises to steer what happens to its job instead of a plain failure.

``raise RetryIn(60)`` reschedules the job in 60 s regardless of the backoff schedule (rate
limits, a dependency that says "come back later"); ``raise NoRetry("bad input")`` sends it
straight to the dead set, because retrying a job that can never succeed only burns capacity.
Both still count as a failed attempt and record errtype/message like any exception.
Raised ``from`` another exception, they report that exception's type and message.
"""

from __future__ import annotations

__all__ = ["NoRetry", "RetryIn"]


class RetryIn(Exception):
    """Fail this attempt and retry after ``seconds`` (0 means as soon as possible)."""

    def __init__(self, seconds: float, message: str = "", *, errtype: str | None = None) -> None:
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        self.seconds = seconds
        self.message = message
        self.errtype = errtype
        super().__init__(message or f"retry in {seconds:g}s")


class NoRetry(Exception):
    """Fail this attempt and do not retry: the job goes to the dead set."""

    def __init__(self, message: str = "", *, errtype: str | None = None) -> None:
        self.message = message
        self.errtype = errtype
        super().__init__(message or "not retried")
