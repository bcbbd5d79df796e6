"""Turning a handler's exception into the failure report the server stores.

errtype is the exception's class name (what dashboards group by), message its text, and the
backtrace the innermost frames of the handler's own code: the worker's frames are dropped
because they are the same for every job and would only push the useful lines out.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import Any

from .control import NoRetry, RetryIn
from .registry import Handler

__all__ = ["FailureReport", "RemoteHandlerError", "describe_failure"]

_PACKAGE_DIR = str(Path(__file__).resolve().parent)
# The server's limits (errtype 200 chars, message 10,000, backtrace 1,000 lines of 10,000, no
# NUL anywhere): a failure report it rejected would be a failure never recorded.
MAX_ERRTYPE = 200
MAX_MESSAGE = 4000
MAX_LINES = 1000
MAX_LINE = 2000
_HANDLER_CALL_CODE = Handler.call.__code__


def _clean(text: str, limit: int) -> str:
    # Lone surrogates (a file name decoded with surrogateescape) cannot be sent as UTF-8.
    text = text.encode("utf-8", "backslashreplace").decode()
    return text.replace("\x00", "\\x00")[:limit]


def _text(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in when the exception cannot say it."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() failed>"


@dataclass(frozen=True, slots=True)
class FailureReport:
    """The body of a fail request, minus the lease."""

    errtype: str
    message: str
    backtrace: list[str]
    retry_in: float | None = None
    retry: bool | None = None

    def request_fields(self) -> dict[str, Any]:
        """The report as the keyword arguments of ``fail``."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def sanitized(self) -> FailureReport:
        """The same report within the server's limits (any text the handler produced fits)."""
        return FailureReport(
            errtype=_clean(self.errtype, MAX_ERRTYPE) or "unknown",
            message=_clean(self.message, MAX_MESSAGE),
            backtrace=[_clean(line, MAX_LINE) for line in self.backtrace[-MAX_LINES:]],
            retry_in=self.retry_in,
            retry=self.retry,
        )


class RemoteHandlerError(Exception):
    """A failure that happened out of this process (a job child process); carries its report."""

    def __init__(self, report: FailureReport) -> None:
        self.report = report
        super().__init__(f"{report.errtype}: {report.message}")


def _handler_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the handler's own frame on.

    The frame after the last ``Handler.call`` is where user code starts; everything before it
    (worker loop, asyncio, threads) is the same for every job. Without such a frame (an error
    in middleware), only the SDK's leading frames are dropped.
    """
    start = None
    cursor = tb
    while cursor is not None:
        if cursor.tb_frame.f_code is _HANDLER_CALL_CODE and cursor.tb_next is not None:
            start = cursor.tb_next
        cursor = cursor.tb_next
    if start is not None:
        return start
    while tb is not None and tb.tb_next is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            break
        tb = tb.tb_next
    return tb


def format_backtrace(exc: BaseException, max_lines: int) -> list[str]:
    """Traceback lines of ``exc`` (handler frames only), keeping the last ``max_lines``."""
    if max_lines <= 0:
        return []
    tb = _handler_frames(exc.__traceback__)
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-max_lines:]


def describe_failure(exc: BaseException, max_lines: int) -> FailureReport:
    """The report for ``exc``, honouring ``RetryIn`` / ``NoRetry`` signals."""
    if isinstance(exc, RemoteHandlerError):
        return exc.report
    if not isinstance(exc, RetryIn | NoRetry):
        return FailureReport(
            errtype=type(exc).__name__,
            message=_text(exc)[:MAX_MESSAGE],
            backtrace=format_backtrace(exc, max_lines),
        )
    subject = exc.__cause__ or exc
    return FailureReport(
        errtype=exc.errtype or type(subject).__name__,
        message=(exc.message or _text(subject))[:MAX_MESSAGE],
        backtrace=format_backtrace(subject, max_lines),
        retry_in=exc.seconds if isinstance(exc, RetryIn) else None,
        retry=False if isinstance(exc, NoRetry) else None,
    )
