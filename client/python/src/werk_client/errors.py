"""Typed exceptions for everything the Werk server (or the network) can answer with.

The server renders every error as RFC 9457 problem+json with a stable machine ``code``. Callers
branch on the exception class (``except LeaseLost``), never on message text, so each stable code
maps to one class here. Codes this SDK does not know yet still become a ``WerkError`` carrying
the code, so a newer server never crashes an older client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = [
    "Forbidden",
    "JobNotFound",
    "LeaseLost",
    "NotUnique",
    "PayloadTooLarge",
    "ServerError",
    "Unauthorized",
    "Unavailable",
    "ValidationError",
    "WerkError",
    "error_from_response",
]


class WerkError(Exception):
    """Base class: an error answer from the server, or a failure to reach it.

    ``code`` is the server's stable code (``lease_lost``, ``job_not_found`` ...), ``status`` the
    HTTP status (``None`` when no answer arrived), ``detail`` the human explanation, and
    ``errors`` the per-field list the server gives for invalid requests.
    """

    default_code = "error"

    def __init__(
        self,
        detail: str = "",
        *,
        code: str | None = None,
        status: int | None = None,
        errors: list[dict[str, Any]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.code = code or self.default_code
        self.status = status
        self.detail = detail
        self.errors = errors or []
        self.retry_after = retry_after
        super().__init__(self._describe())

    def _describe(self) -> str:
        head = f"{self.code}" if self.status is None else f"{self.status} {self.code}"
        text = f"{head}: {self.detail}" if self.detail else head
        if self.errors:
            fields = "; ".join(f"{e.get('loc', '?')}: {e.get('message', '')}" for e in self.errors)
            text = f"{text} ({fields})"
        return text


class ValidationError(WerkError):
    """The server rejected the request as malformed (``invalid_request``, 400/422; also a
    graph of jobs it refused: ``dependency_cycle``, ``dependency_not_found``)."""

    default_code = "invalid_request"


class JobNotFound(WerkError):
    """No job with that jid (``job_not_found``, 404); completed jobs are deleted at ack."""

    default_code = "job_not_found"


class LeaseLost(WerkError):
    """The lease presented is no longer the job's current one (``lease_lost``, 409).

    The reservation expired or the job was handed to another worker: this worker must stop
    treating the job as its own; nothing it sends for that lease will be applied.
    """

    default_code = "lease_lost"


class NotUnique(WerkError):
    """Another job holds the pushed job's unique key (``not_unique``, 409); ``existing_jid``
    names it."""

    default_code = "not_unique"

    def __init__(self, detail: str = "", *, existing_jid: str = "", **kwargs: Any) -> None:
        self.existing_jid = existing_jid
        super().__init__(detail, **kwargs)


class PayloadTooLarge(WerkError):
    """The request body exceeded the server's limit (``payload_too_large``, 413)."""

    default_code = "payload_too_large"


class ResultTooLarge(PayloadTooLarge):
    """An ack's result exceeded the server's ``WERK_MAX_RESULT_BYTES`` (``result_too_large``,
    413); nothing was acked."""

    default_code = "result_too_large"


class Unauthorized(WerkError):
    """Missing or unknown bearer token (``unauthorized``, 401)."""

    default_code = "unauthorized"


class Forbidden(WerkError):
    """The token lacks the scope this call needs (``forbidden``, 403)."""

    default_code = "forbidden"


class Unavailable(WerkError):
    """The server could not be reached or said it cannot serve now, even after retries.

    Raised for ``database_unavailable`` (503), gateway errors (502/504) and transport failures
    (connection refused, timeouts). ``status`` is ``None`` when no HTTP answer arrived.
    """

    default_code = "unavailable"


class ServerError(WerkError):
    """The server failed unexpectedly (``internal_error``, 500)."""

    default_code = "internal_error"


class BatchNotFound(WerkError):
    """No batch with that bid (``batch_not_found``, 404)."""

    default_code = "batch_not_found"


class BatchClosed(WerkError):
    """The batch takes no members now (409): ``batch_committed`` (open it again first) or
    ``batch_finished`` (it never takes any again)."""

    default_code = "batch_committed"


_BY_CODE: dict[str, type[WerkError]] = {
    "batch_not_found": BatchNotFound,
    "batch_committed": BatchClosed,
    "batch_finished": BatchClosed,
    "invalid_request": ValidationError,
    "invalid_json": ValidationError,
    "malformed_request": ValidationError,
    "dependency_cycle": ValidationError,
    "dependency_not_found": ValidationError,
    "job_not_found": JobNotFound,
    "lease_lost": LeaseLost,
    "not_unique": NotUnique,
    "payload_too_large": PayloadTooLarge,
    "result_too_large": ResultTooLarge,
    "unauthorized": Unauthorized,
    "ambiguous_credentials": Unauthorized,
    "too_many_auth_failures": Unauthorized,
    "forbidden": Forbidden,
    "cross_site_request": Forbidden,
    "database_unavailable": Unavailable,
    "internal_error": ServerError,
}

_BY_STATUS: dict[int, type[WerkError]] = {
    400: ValidationError,
    401: Unauthorized,
    403: Forbidden,
    404: JobNotFound,
    409: LeaseLost,
    413: PayloadTooLarge,
    422: ValidationError,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


class Answer(Protocol):
    """What an error is built from: ``transport.Response``, or an ``httpx.Response`` when the
    client was given an httpx transport."""

    @property
    def status_code(self) -> int: ...

    @property
    def reason_phrase(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> bytes: ...


def parse_retry_after(response: Answer) -> float | None:
    """Seconds from a ``Retry-After`` header given as a number; dates are ignored."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_from_response(response: Answer) -> WerkError:
    """Build the typed exception for a non-2xx answer.

    The problem+json ``code`` decides the class; the status is the fallback for answers that
    did not come from Werk itself (a proxy's 502, a 404 from a wrong base URL).
    """
    body: dict[str, Any] = {}
    try:
        parsed = json.loads(response.content)
        if isinstance(parsed, dict):
            body = parsed
    except (ValueError, UnicodeDecodeError):
        pass
    code = body.get("code") if isinstance(body.get("code"), str) else None
    detail = body.get("detail") or body.get("title") or response.reason_phrase or ""
    errors = body.get("errors") if isinstance(body.get("errors"), list) else None
    status = response.status_code
    fallback = ServerError if status >= 500 else WerkError
    if code is not None and code in _BY_CODE:
        cls = _BY_CODE[code]
    elif code is not None and status < 500:
        # A code this SDK does not know (a newer server): do not guess from the status.
        cls = WerkError
    else:
        cls = _BY_STATUS.get(status, fallback)
    if code is None:
        code = cls.default_code if cls is not WerkError else f"http_{response.status_code}"
    if cls is NotUnique:
        return NotUnique(
            str(detail),
            existing_jid=str(body.get("existing_jid", "")),
            code=code,
            status=response.status_code,
        )
    return cls(
        str(detail),
        code=code,
        status=response.status_code,
        errors=errors,
        retry_after=parse_retry_after(response),
    )
