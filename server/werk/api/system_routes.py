"""Server summary and health probes."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from werk.api import schemas
from werk.api.problems import werk_problem
from werk.api.responses import JSON
from werk.errors import DatabaseUnavailable
from werk.http.deps import ServicesDep

router = APIRouter(tags=["system"])
# The API description where tokens are configured: served to token holders only.
description_router = APIRouter()

READY_TIMEOUT = 2.0  # seconds; a database that takes longer is not ready


@router.get("/v1/info", operation_id="system-info", response_model=schemas.Info)
async def info(services: ServicesDep) -> Response:
    """Totals, counts per state, queue sizes and latency, workers, version, uptime."""
    return JSON(await services.info.info())


@router.get("/livez", operation_id="system-livez")
async def livez() -> dict[str, str]:
    """The process is up (does not touch the database)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="system-readyz",
    responses={503: {"model": schemas.Problem}},
)
async def readyz(services: ServicesDep) -> Response:
    """Ready to serve: the database answers. 503 while it does not."""
    try:
        await asyncio.wait_for(services.info.ping(), READY_TIMEOUT)
    except Exception:
        return werk_problem(DatabaseUnavailable("the database does not answer"))
    return JSON({"status": "ready"})


@description_router.get("/openapi.json", include_in_schema=False)
async def openapi_document(request: Request) -> Response:
    return JSONResponse(request.app.openapi())
