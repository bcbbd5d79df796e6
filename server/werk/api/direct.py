"""The job traffic (push, fetch, ack, fail, extend, beat), served without FastAPI in between.

FastAPI's per-request work (routing through every router, solving dependencies, building a
Request, its exception and exit-stack wrappers) costs more CPU than the database work of the hot
endpoints (compare bench `livez` with a bare ASGI callable), so
this layer answers them itself, calling the very endpoint functions FastAPI registers and
documents (one definition, one OpenAPI entry).

It takes only the plain, valid case. Anything else (another path or method, a body that does not
validate, a content type other than JSON, a body without Content-Length or above the limit,
missing or insufficient credentials, a blocked client) is handed to FastAPI unchanged, so every
rejection keeps FastAPI's exact problem+json answer and the failed-authentication accounting stays
in one place.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from werk.api.limits import replaying
from werk.config import Scope as AuthScope
from werk.domain import job as rules
from werk.services.access import Authenticator
from werk.services.metrics import RequestDurations

Endpoint = Callable[..., Awaitable[Response]]

# What an endpoint served here may take (see DirectRoute).
_ARGUMENTS = frozenset({"body", "services", "settings", "jid", "prefer", "request"})

# The JidInPath rule (schemas), for one path segment.
_JID_SEGMENT = re.compile(rules.JID_PATTERN)


@dataclass(frozen=True, slots=True)
class DirectRoute:
    """``path`` may hold one ``{jid}`` segment. The endpoint takes ``body`` (its annotation is
    the request model or TypedDict) and ``services``, and any of ``settings``, ``jid``,
    ``prefer`` (the Prefer header) and ``request`` (its body already read), as keyword
    arguments."""

    method: str
    path: str
    endpoint: Endpoint
    scope: AuthScope
    # A faster, stricter decoder of the body: an object the endpoint uses as it uses the
    # model, or None for a body the model should look at (so every refusal is the model's).
    fast_body: Callable[[bytes], Any] | None = None

    @property
    def body_type(self) -> Any:
        """The ``body`` annotation: a model, or a TypedDict (validated the same way)."""
        return get_type_hints(self.endpoint, include_extras=True)["body"]


@dataclass(frozen=True, slots=True)
class _Plan:
    route: DirectRoute
    body: TypeAdapter[Any]
    extra: tuple[str, ...]  # what the endpoint takes besides ``body`` and ``services``


class DirectRoutes:
    """Sits in front of FastAPI's middleware stack (see werk.app), so on its own path it also
    does what that stack would: bound the body and time the request."""

    def __init__(
        self,
        app: ASGIApp,
        routes: Sequence[DirectRoute],
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
                raise TypeError(f"{route.path}: see DirectRoute for what its endpoint may take")
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
                if len(jid) <= rules.JID_MAX_LENGTH and _JID_SEGMENT.fullmatch(jid):
                    return plan, jid
                return None
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = self._match(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if matched is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        plan, jid = matched
        headers = _Headers(scope)
        if not headers.plain_json(self._max_body_bytes):
            await self.app(scope, receive, send)
            return
        body, replay = await _read_body(receive)
        kwargs = self._arguments(scope, receive, plan, headers, body, jid)
        if kwargs is None:
            await self.app(scope, replay, send)
            return
        try:
            response = await plan.route.endpoint(**kwargs)
        except Exception as exc:
            response = await _handle(scope, exc)
        await response(scope, replay, send)
        self._durations.observe(
            scope["method"], plan.route.path, response.status_code, time.perf_counter() - started
        )

    def _arguments(
        self,
        scope: Scope,
        receive: Receive,
        plan: _Plan,
        headers: _Headers,
        body: bytes,
        jid: str | None,
    ) -> dict[str, Any] | None:
        """The endpoint's arguments, or None when FastAPI should answer this request."""
        state = scope["app"].state
        auth: Authenticator = state.auth
        if auth.enabled and not _authorized(auth, scope, headers.authorization, plan.route.scope):
            return None
        fast = plan.route.fast_body
        value = None if fast is None else fast(body)
        if value is None:
            try:
                value = plan.body.validate_json(body)
            except ValidationError:
                return None
        kwargs: dict[str, Any] = {"body": value, "services": state.services}
        for name in plan.extra:
            if name == "settings":
                kwargs[name] = state.settings
            elif name == "jid":
                kwargs[name] = jid
            elif name == "prefer":
                kwargs[name] = headers.prefer
            else:  # request; the body is read: its receive has nothing to replay
                kwargs[name] = Request(scope, receive)
        return kwargs


class _Headers:
    __slots__ = ("authorization", "content_length", "content_type", "prefer")

    def __init__(self, scope: Scope) -> None:
        self.content_type = self.authorization = b""
        self.content_length = -1
        self.prefer: str | None = None
        for name, value in scope["headers"]:
            if name == b"content-type":
                self.content_type = value
            elif name == b"authorization":
                self.authorization = value
            elif name == b"content-length" and value.isdigit():
                self.content_length = int(value)
            elif name == b"prefer" and self.prefer is None:  # the first, as FastAPI's Header
                self.prefer = value.decode("latin-1")

    def plain_json(self, max_body_bytes: int) -> bool:
        """A JSON body of declared length within the limit (else BodyLimit and FastAPI answer)."""
        return (
            0 <= self.content_length <= max_body_bytes
            and self.content_type.split(b";", 1)[0].strip().lower() == b"application/json"
        )


async def _handle(scope: Scope, exc: Exception) -> Response:
    """The answer FastAPI would give: the app's exception handler for the nearest class."""
    handlers = scope["app"].exception_handlers
    for cls in type(exc).__mro__:
        handler = handlers.get(cls)
        if handler is not None:
            response: Response = await handler(Request(scope), exc)
            return response
    raise exc


def _authorized(auth: Authenticator, scope: Scope, authorization: bytes, needed: str) -> bool:
    client = scope.get("client")
    if auth.limiter.retry_after(client[0] if client else "unknown") is not None:
        return False
    kind, _, token = authorization.decode("latin-1").partition(" ")
    if kind.lower() != "bearer" or not token:
        return False
    principal = auth.identify(token.strip())
    return principal is not None and principal.allows(needed)


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole body (its declared length is within the limit), and a receive that replays
    it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    return body, replaying(body, receive)
