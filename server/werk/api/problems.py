"""Every error leaves the server as RFC 9457 problem+json with a stable ``code``."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match

from werk.errors import DatabaseUnavailable, UnsupportedMediaType, WerkError

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
    status: int,
    code: str,
    title: str,
    detail: str,
    errors: list[dict[str, Any]] | None = None,
    members: Mapping[str, Any] | None = None,
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
    if members:
        body.update(members)
    return orjson.dumps(body)


def problem(
    status: int,
    code: str,
    title: str,
    detail: str,
    *,
    errors: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
    members: Mapping[str, Any] | None = None,
) -> Response:
    return Response(
        problem_json(status, code, title, detail, errors, members),
        status_code=status,
        media_type="application/problem+json",
        headers=headers,
    )


# What FastAPI's JSON parser raises, besides a syntax error, for a body it cannot read: nesting
# deeper than the interpreter's recursion allows, bytes that are not UTF-8 (UnicodeDecodeError),
# an integer of more digits than Python converts. FastAPI answers each as a bare 400 raised
# from it.
_UNREADABLE_JSON = (RecursionError, ValueError)


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
    return problem(
        exc.status,
        exc.code,
        exc.title,
        exc.detail,
        errors=exc.errors,
        headers=headers,
        members=exc.members,
    )


def _loc(parts: tuple[Any, ...]) -> str:
    if parts and parts[0] in ("body", "query", "path"):
        parts = parts[1:]
    return ".".join(str(p) for p in parts) or "body"


# The methods of HTTP a route may take (RFC 9110, and PATCH).
METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed(app: FastAPI, request: Request) -> str:
    """Every method some route of this path takes: asked of the app's routes one method at a
    time, since Starlette names only the first route's (/v1/jobs takes GET and POST from two
    routers)."""
    allowed = ", ".join(
        method
        for method in METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in app.router.routes
        )
    )
    if "GET" in allowed:  # werk.http.head answers HEAD as GET
        allowed = allowed.replace("GET", "GET, HEAD")
    # No route takes it by method: a mount refused it, the dashboard's static files.
    return allowed or "GET, HEAD"


def json_media(content_type: str) -> bool:
    """Whether a body of this Content-Type is read as JSON (as FastAPI reads bodies): none,
    application/json or application/*+json."""
    media = content_type.split(";", 1)[0].strip().lower()
    return (
        not media
        or media == "application/json"
        or (media.startswith("application/") and media.endswith("+json"))
    )


def install(app: FastAPI, unavailable: tuple[type[Exception], ...]) -> None:
    """``unavailable``: the exception types that mean the database is away (answered 503)."""

    async def on_werk_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WerkError)
        return werk_problem(exc)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if not json_media(request.headers.get("content-type", "")) and any(
            e.get("loc", ())[:1] == ("body",) for e in exc.errors()
        ):
            return werk_problem(UnsupportedMediaType())
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
            and json_media(request.headers.get("content-type", ""))
        ):
            cause = exc.__cause__
            reason = "nested too deeply" if isinstance(cause, RecursionError) else str(cause)
            return invalid_json([{"loc": "body", "message": reason}])
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = _allowed(app, request)
        return problem(
            exc.status_code,
            code,
            code.replace("_", " ").capitalize(),
            str(exc.detail),
            headers=headers,
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


# What each status means, for the statuses an operation may answer besides its own (the codes
# in the descriptions are the usual ones; a client reads ``code`` from the body).
_COMMON = {
    "400": "the request is malformed: malformed_request (not HTTP/1.1 the server can parse), "
    "invalid_json (the body is not JSON), or a code naming the refused part",
    "401": "unauthorized: no valid bearer token (WWW-Authenticate says Bearer)",
    "403": "forbidden: the token lacks the scope the operation needs (or another refusal, "
    "named by its code)",
    "408": "request_timeout: the request's head or body did not arrive within "
    "WERK_HEADER_TIMEOUT or WERK_BODY_TIMEOUT (the connection is then closed)",
    "413": "payload_too_large: the body is over WERK_MAX_BODY_BYTES",
    "415": "unsupported_media_type: a body that is not Content-Type: application/json",
    "421": "host_not_allowed: the Host header names no host this server answers to "
    "(WERK_ALLOWED_HOSTS)",
    "422": "invalid_request: a field or parameter is invalid (`errors` says which)",
    "429": "too_many_auth_failures: too many failed authentications from this address",
    "431": "header_too_large: the request line and headers are over WERK_MAX_HEADER_BYTES",
    "500": "internal_error: the server failed unexpectedly (the error is logged)",
    "503": "database_unavailable: the database is unreachable; retry (Retry-After)",
}
_PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def document(app: FastAPI, offline: Collection[str], probes: Collection[str]) -> None:
    """Declares every error an operation can answer, each as problem+json with the Problem
    schema (generated clients then parse error bodies, 204 operations included): the ones a
    route names, the body and authentication errors that apply to it, and the limit and failure
    answers of every request. ``offline``: the paths that never touch the database (no 503);
    ``probes``: the paths answered whatever the Host (no 421)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status in _statuses(path, operation, offline, probes):
                    responses.setdefault(status, {"description": _COMMON[status]})
                for status, response in responses.items():
                    if status[0] in "45":
                        response["content"] = _problem_content(response)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        # FastAPI's own 422 models: never sent (every 422 is a Problem).
        for unused in ("HTTPValidationError", "ValidationError"):
            components.pop(unused, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _problem_content(response: dict[str, Any]) -> dict[str, Any]:
    """problem+json with the schema the route names when it is a Problem with more members
    (``NotUniqueProblem``), else with Problem."""
    named = response.get("content", {}).get("application/json", {}).get("schema", {})
    if named.get("$ref", "").endswith("Problem"):
        return {"application/problem+json": {"schema": named}}
    return _PROBLEM


def _statuses(
    path: str, operation: dict[str, Any], offline: Collection[str], probes: Collection[str]
) -> list[str]:
    statuses = ["400", "408", "413", "431", "500"]
    if path not in probes:
        statuses.append("421")
    if "requestBody" in operation:
        statuses += ["415", "422"]
    elif operation.get("parameters"):
        statuses.append("422")
    if operation.get("security"):
        statuses += ["401", "403", "429"]
    if path not in offline:
        statuses.append("503")
    return statuses
