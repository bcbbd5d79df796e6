"""GET /metrics (Prometheus text) and the middleware that times every request."""

from __future__ import annotations

import time

from fastapi import APIRouter
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from werk.api.problems import METHODS
from werk.http.deps import ServicesDep
from werk.services.metrics import CONTENT_TYPE, RequestDurations

router = APIRouter(tags=["system"])


@router.get(
    "/metrics",
    operation_id="system-metrics",
    response_class=Response,  # the answer is text: no JSON media type in the document
    responses={
        200: {
            "content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
            "description": "Prometheus text format",
        }
    },
)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus metrics: job counters and gauges per queue, workers, request durations."""
    return Response(await services.metrics.render(), media_type=CONTENT_TYPE)


class TimeRequests:
    """Records each HTTP request's duration under its route template (never the raw path, so a
    jid never becomes a label)."""

    def __init__(self, app: ASGIApp, durations: RequestDurations) -> None:
        self.app = app
        self.durations = durations

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route is None:
                route = "/static" if scope["path"].startswith("/static/") else "(unmatched)"
            # Any token is a method to the parser; only those of HTTP become a label of their own,
            # so that no client can add series at will.
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.durations.observe(method, route, status, time.perf_counter() - started)
