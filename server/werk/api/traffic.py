"""The job traffic (push, fetch, ack, fail, extend, beat) and every other request with a body:
the one path their requests take, and the one decoder of their bodies (msgspec Structs, see
werk.domain.bodies).

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
from typing import Annotated, Any, TypeVar, get_args, get_type_hints

import msgspec
from fastapi import Depends, FastAPI
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
from werk.domain.bodies import EXACT, Body, every_error
from werk.errors import UnsupportedMediaType
from werk.services.metrics import RequestDurations

Endpoint = Callable[..., Awaitable[Response]]
T = TypeVar("T")


def _served_by_traffic() -> None:
    raise RuntimeError("a traffic body is decoded by werk.api.traffic, never by FastAPI")


# The ``body`` of a traffic endpoint, a msgspec Struct: FastAPI, which only declares the route,
# takes it for a dependency without parameters (nothing to document); the request body is
# documented from the Struct (document()).
Traffic = Annotated[T, Depends(_served_by_traffic)]

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
    """``path`` may hold one ``{jid}`` segment. The endpoint takes ``body`` (annotated
    ``Traffic[Struct]``) and ``services``, and any of ``settings``, ``jid``,
    ``prefer`` (the Prefer header) and ``request`` (its body already read), as keyword
    arguments."""

    method: str
    path: str
    endpoint: Endpoint
    scope: AuthScope

    @property
    def body_type(self) -> type[Body]:
        """The Struct of the ``body`` annotation."""
        hint = get_type_hints(self.endpoint, include_extras=True)["body"]
        args = get_args(hint)
        if not any(getattr(m, "dependency", None) is _served_by_traffic for m in args[1:]):
            raise TypeError(f"{self.path}: the body is annotated Traffic[Struct]")
        body_type: type[Body] = args[0]
        return body_type


@dataclass(frozen=True, slots=True)
class _Plan:
    route: TrafficRoute
    decode: Callable[[bytes], Any]
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
            plan = _Plan(route, msgspec.json.Decoder(route.body_type).decode, extra)
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
            value = plan.decode(body)
        except msgspec.ValidationError as exc:
            # msgspec stops at the first invalid field: the rest may not even be JSON (which
            # is the answer then, as for a body read whole first).
            invalid = every_error(plan.route.body_type, _readable(body), exc)
            raise RequestValidationError(
                [{"loc": ("body", loc), "msg": message} for loc, message in invalid]
            ) from None
        except (msgspec.DecodeError, RecursionError) as exc:
            raise _unreadable(exc) from None
        if jid is not None:
            try:
                _JID.validate_python(jid)
            except ValidationError as exc:
                # As FastAPI reports a path parameter's errors (the GET routes' JidInPath).
                errors = [{**e, "loc": ("path", "jid", *e["loc"])} for e in exc.errors()]
                raise RequestValidationError(errors) from None
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


def _readable(body: bytes) -> Any:
    """``body`` decoded; raises invalid JSON's error unless it is JSON that jsonb can hold."""
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _unreadable(exc) from None


def _unreadable(exc: Exception) -> RequestValidationError:
    """msgspec's refusal of a body that is no JSON it reads (nested too deeply for its
    recursion, not UTF-8, an integer beyond what it decodes, ...) as invalid JSON."""
    if isinstance(exc, RecursionError):
        reason = "nested too deeply"
    elif str(exc) == "Input data was truncated":
        # msgspec's words also for a string whose last character is an unpaired high surrogate
        # escape (\ud800 to \udbff), which no text holds.
        reason = "the JSON ends before it is complete, or a string ends in an unpaired surrogate"
    else:
        reason = str(exc)
    return RequestValidationError([{"type": "json_invalid", "loc": ("body",), "msg": reason}])


async def _handle(scope: Scope, exc: Exception) -> Response:
    """The app's exception handler for the nearest class (werk.api.problems installs them)."""
    handlers = scope["app"].exception_handlers
    for cls in type(exc).__mro__:
        handler = handlers.get(cls)
        if handler is not None:
            response: Response = await handler(Request(scope), exc)
            return response
    raise exc


def document(app: FastAPI, routes: Sequence[TrafficRoute]) -> None:
    """States each msgspec body of ``routes`` in the OpenAPI document: the operation's request
    body, and the Structs' schemas (msgspec.json.schema_components) among the components."""
    generate = app.openapi
    structs = {(r.method.lower(), r.path): r.body_type for r in routes}
    extras = {cls.__name__: cls.schema_extra for cls in _subclasses(Body) if cls.schema_extra}

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        refs, components = msgspec.json.schema_components(
            list(structs.values()), ref_template="#/components/schemas/{name}"
        )
        for (method, path), ref in zip(structs, refs, strict=True):
            schema["paths"][path][method]["requestBody"] = {
                "content": {"application/json": {"schema": ref}},
                "required": True,
            }
        known = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, component in components.items():
            if name in known and "enum" in component:
                continue  # the same enum, as the responses state it
            if name in known:
                raise RuntimeError(f"two schemas named {name}")
            known[name] = {**_stated(component), **extras.get(name, {})}
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _subclasses(cls: type[Body]) -> list[type[Body]]:
    found = cls.__subclasses__()
    return [*found, *(s for c in found for s in _subclasses(c))]


def _stated(node: Any) -> Any:
    """A Struct's schema as JSON Schema states its rules: an integer() field as an integer
    (31.0 is one), an exact() pattern as the pattern it is in ECMA's syntax, and no empty
    object as a default (some generators take none but null)."""
    if isinstance(node, dict):
        node = {k: _stated(v) for k, v in node.items() if not (k == "default" and v == {})}
        pattern = node.get("pattern")
        if isinstance(pattern, str) and pattern.endswith(EXACT):
            node["pattern"] = pattern.removesuffix(EXACT)
        options = node.get("anyOf")
        if options and {"type": "integer"} in [{"type": o.get("type")} for o in options]:
            kept = [
                o
                for o in options
                if not (o.get("type") == "number" and {**o, "type": "integer"} in options)
            ]
            node["anyOf"] = kept
            if len(kept) == 1:
                node.update(node.pop("anyOf")[0])
        return node
    if isinstance(node, list):
        return [_stated(v) for v in node]
    return node
