"""Every error leaves the server as RFC 9457 problem+json with a stable ``code``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from werk.errors import DatabaseUnavailable, WerkError

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def problem_json(
    status: int, code: str, title: str, detail: str, errors: list[dict[str, Any]] | None = None
) -> bytes:
    body: dict[str, Any] = {
        "type": f"https://werk.dev/problems/{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if errors is not None:
        body["errors"] = errors
    return orjson.dumps(body)


def problem(
    status: int,
    code: str,
    title: str,
    detail: str,
    *,
    errors: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    return Response(
        problem_json(status, code, title, detail, errors),
        status_code=status,
        media_type="application/problem+json",
        headers=headers,
    )


# What FastAPI's JSON parser raises, besides a syntax error, for a body it cannot read: nesting
# deeper than the interpreter's recursion allows, bytes that are not UTF-8 (UnicodeDecodeError),
# an integer of more digits than Python converts. FastAPI answers each as a bare 400 raised
# from it.
_UNREADABLE_JSON = (RecursionError, ValueError)


def _sent_json(request: Request) -> bool:
    """Whether the body was read as JSON (FastAPI reads application/json and any +json)."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind.startswith("application/") and kind.endswith(("/json", "+json"))


def invalid_json(errors: list[dict[str, Any]]) -> Response:
    return problem(
        400,
        "invalid_json",
        "The body is not valid JSON",
        "send a JSON document with Content-Type: application/json",
        errors=errors,
    )


def werk_problem(exc: WerkError) -> Response:
    headers = {"Retry-After": "1"} if isinstance(exc, DatabaseUnavailable) else None
    return problem(exc.status, exc.code, exc.title, exc.detail, errors=exc.errors, headers=headers)


def _loc(parts: tuple[Any, ...]) -> str:
    if parts and parts[0] in ("body", "query", "path"):
        parts = parts[1:]
    return ".".join(str(p) for p in parts) or "body"


def install(app: FastAPI, unavailable: tuple[type[Exception], ...]) -> None:
    """``unavailable``: the exception types that mean the database is away (answered 503)."""

    async def on_werk_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WerkError)
        return werk_problem(exc)

    async def on_validation(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"loc": _loc(tuple(e.get("loc", ()))), "message": e.get("msg", "invalid")}
            for e in exc.errors()
        ]
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            return invalid_json(errors)
        detail = "; ".join(f"{e['loc']}: {e['message']}" for e in errors)
        return problem(422, "invalid_request", "The request is invalid", detail, errors=errors)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if (
            exc.status_code == 400
            and isinstance(exc.__cause__, _UNREADABLE_JSON)
            and _sent_json(request)
        ):
            cause = exc.__cause__
            reason = "nested too deeply" if isinstance(cause, RecursionError) else str(cause)
            return invalid_json([{"loc": "body", "message": reason}])
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return problem(
            exc.status_code,
            code,
            code.replace("_", " ").capitalize(),
            str(exc.detail),
            headers=exc.headers,
        )

    async def on_unavailable(_request: Request, exc: Exception) -> Response:
        log.warning("database unavailable: %s", exc)
        return werk_problem(DatabaseUnavailable("the database is unreachable; retry shortly"))

    async def on_unexpected(_request: Request, exc: Exception) -> Response:
        log.error("unhandled error", exc_info=exc)
        return problem(
            500,
            "internal_error",
            "Internal server error",
            "the server failed unexpectedly; the error has been logged",
        )

    app.add_exception_handler(WerkError, on_werk_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    for exc_type in unavailable:
        app.add_exception_handler(exc_type, on_unavailable)
    app.add_exception_handler(Exception, on_unexpected)
