"""The job traffic (push, fetch, ack, fail, extend, beat): the one path its requests take.

FastAPI's per-request work (matching every route in turn, solving dependencies, building a
Request, its exception and exit-stack wrappers) costs the server more than the rest of such a
request, so these routes are dispatched here and never by FastAPI. They are still declared on
FastAPI's routers, which is what the OpenAPI document is generated from; the endpoints are the
same functions, and every answer of this router, refusals included, is built by the same code
FastAPI's routes use: the authenticator (werk.api.auth), the body reader (werk.api.limits), the
exception handlers (werk.api.problems), the request models and the request durations. The Host
and cross-site rules are middleware in front of both (see werk.app).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, get_type_hints

from fastapi.exceptions import RequestValidationError
from pydantic import StringConstraints, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from werk.api.auth import authenticated, bearer_token
from werk.api.limits import ClientGone, read_body
from werk.api.problems import json_media
from werk.config import Scope as AuthScope
from werk.domain import job as rules
from werk.errors import UnsupportedMediaType
from werk.services.metrics import RequestDurations

Endpoint = Callable[..., Awaitable[Response]]

# What an endpoint served here may take (see TrafficRoute).
_ARGUMENTS = frozenset({"body", "services", "settings", "jid", "prefer", "request"})

# The JidInPath rule (schemas).
_JID: TypeAdapter[str] = TypeAdapter(
    Annotated[
        str,
        StringConstraints(min_length=1, max_length=rules.JID_MAX_LENGTH, pattern=rules.JID_PATTERN),
    ]
)


@dataclass(frozen=True, slots=True)
class TrafficRoute:
    """``path`` may hold one ``{jid}`` segment. The endpoint takes ``body`` (its annotation is
    the request model or TypedDict) and ``services``, and any of ``settings``, ``jid``,
    ``prefer`` (the Prefer header) and ``request`` (its body already read), as keyword
    arguments."""

    method: str
    path: str
    endpoint: Endpoint
    scope: AuthScope

    @property
    def body_type(self) -> Any:
        """The ``body`` annotation: a model, or a TypedDict (validated the same way)."""
        return get_type_hints(self.endpoint, include_extras=True)["body"]


@dataclass(frozen=True, slots=True)
class _Plan:
    route: TrafficRoute
    body: TypeAdapter[Any]
    extra: tuple[str, ...]  # what the endpoint takes besides ``body`` and ``services``


class TrafficRouter:
    """Answers the requests of its routes; every other request goes on to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        routes: Sequence[TrafficRoute],
        *,
        durations: RequestDurations,
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self._durations = durations
        self._max_body_bytes = max_body_bytes
        self._static: dict[tuple[str, str], _Plan] = {}
        # "/v1/jobs/{jid}/ack" -> ("POST", "/v1/jobs/", "/ack")
        self._by_jid: list[tuple[str, str, str, _Plan]] = []
        for route in routes:
            names = tuple(inspect.signature(route.endpoint).parameters)
            if not {"body", "services"} <= set(names) <= _ARGUMENTS:
                raise TypeError(f"{route.path}: see TrafficRoute for what its endpoint may take")
            extra = tuple(n for n in names if n not in ("body", "services"))
            plan = _Plan(route, TypeAdapter(route.body_type), extra)
            if "{jid}" in route.path:
                head, _, tail = route.path.partition("{jid}")
                self._by_jid.append((route.method, head, tail, plan))
            else:
                self._static[(route.method, route.path)] = plan

    def _match(self, method: str, path: str) -> tuple[_Plan, str | None] | None:
        plan = self._static.get((method, path))
        if plan is not None:
            return plan, None
        for m, head, tail, plan in self._by_jid:
            if m == method and path.startswith(head) and path.endswith(tail):
                jid = path[len(head) : len(path) - len(tail)]
                # A segment: "/v1/jobs/a/b/ack" is no route (as for FastAPI's {jid}).
                return (plan, jid) if jid and "/" not in jid else None
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = self._match(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if matched is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        plan, jid = matched
        try:
            kwargs = await self._arguments(scope, receive, plan, jid)
            response = await plan.route.endpoint(**kwargs)
        except ClientGone:
            return
        except Exception as exc:
            response = await _handle(scope, exc)
        await response(scope, receive, send)
        self._durations.observe(
            scope["method"], plan.route.path, response.status_code, time.perf_counter() - started
        )

    async def _arguments(
        self, scope: Scope, receive: Receive, plan: _Plan, jid: str | None
    ) -> dict[str, Any]:
        """The endpoint's arguments; raises what the request is refused for, in the order
        FastAPI's routes check: credentials, then the body and the path."""
        content_type = authorization = b""
        prefer: str | None = None
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value
            elif name == b"authorization":
                authorization = value
            elif name == b"prefer" and prefer is None:  # the first, as FastAPI's Header
                prefer = value.decode("latin-1")
        state = scope["app"].state
        if state.auth.enabled:
            client = scope.get("client")
            authenticated(
                state.auth,
                client[0] if client else "unknown",
                bearer_token(authorization.decode("latin-1")),
                (plan.route.scope,),
            )
        if not json_media(content_type.decode("latin-1")):
            raise UnsupportedMediaType()
        body = await read_body(scope, receive, self._max_body_bytes)
        try:
            value = plan.body.validate_json(body)
        except ValidationError as exc:
            raise RequestValidationError(_located(("body",), exc.errors())) from None
        if jid is not None:
            try:
                _JID.validate_python(jid)
            except ValidationError as exc:
                raise RequestValidationError(_located(("path", "jid"), exc.errors())) from None
        kwargs: dict[str, Any] = {"body": value, "services": state.services}
        for name in plan.extra:
            if name == "settings":
                kwargs[name] = state.settings
            elif name == "jid":
                kwargs[name] = jid
            elif name == "prefer":
                kwargs[name] = prefer
            else:  # request; the body is read: its receive has only the disconnect to give
                kwargs[name] = Request(scope, receive)
        return kwargs


def _located(where: tuple[str, ...], errors: list[Any]) -> list[Any]:
    """pydantic's errors as FastAPI reports them: each ``loc`` starts with where it was."""
    return [{**e, "loc": (*where, *e["loc"])} for e in errors]


async def _handle(scope: Scope, exc: Exception) -> Response:
    """The app's exception handler for the nearest class (werk.api.problems installs them)."""
    handlers = scope["app"].exception_handlers
    for cls in type(exc).__mro__:
        handler = handlers.get(cls)
        if handler is not None:
            response: Response = await handler(Request(scope), exc)
            return response
    raise exc
