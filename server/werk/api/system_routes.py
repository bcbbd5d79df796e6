"""Server summary and health probes."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from starlette.responses import Response

from werk.api import schemas
from werk.api.problems import werk_problem
from werk.api.responses import JSON
from werk.errors import DatabaseUnavailable
from werk.http.deps import ServicesDep

router = APIRouter(tags=["system"])

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
