"""Batches: open one with its callbacks, open it again, commit it, read it; the admin list.
Routes translate; services/batches.py decides."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from starlette.responses import Response

from werk.api import batch_schemas as s
from werk.api import schemas
from werk.api.responses import JSON
from werk.api.traffic import Traffic, TrafficRoute
from werk.domain import batches as rules
from werk.domain.job import JID_PATTERN
from werk.http.deps import ServicesDep
from werk.services.views import batch_view

router = APIRouter(prefix="/v1", tags=["batches"], responses=schemas.INVALID_REQUEST)
admin_router = APIRouter(prefix="/v1", tags=["admin"], responses=schemas.INVALID_REQUEST)

BidPath = Annotated[str, Path(min_length=1, max_length=rules.BID_MAX_LENGTH, pattern=JID_PATTERN)]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": schemas.Problem, "description": "batch_not_found"}
}


@router.post(
    "/batches",
    operation_id="batches-new",
    status_code=201,
    response_model=s.Batch,
    responses={
        404: {"model": schemas.Problem, "description": "batch_not_found (the parent)"},
        409: {"model": schemas.Problem, "description": "batch_committed (the parent)"},
    },
)
async def new_batch(body: Traffic[s.BatchNew], services: ServicesDep) -> Response:
    """Open a batch. Jobs join it by carrying its `bid` in `batch` when pushed, until it is
    committed; its callbacks are stored at once, `waiting`, and each is released once, in the
    transaction that meets its condition."""
    given = {"complete": body.on_complete, "success": body.on_success, "death": body.on_death}
    callbacks = {kind: spec for kind, spec in given.items() if spec is not None}
    row = await services.batches.new(body.description, body.parent, callbacks)
    return JSON(batch_view(row), status_code=201)


@router.post(
    "/batches/{bid}/open",
    operation_id="batches-open",
    response_model=s.Batch,
    responses={**_NOT_FOUND, 409: {"model": schemas.Problem, "description": "batch_finished"}},
)
async def open_batch(bid: BidPath, services: ServicesDep) -> Response:
    """Open the batch again so more members may join (a member job may open its own batch to
    add work from inside). Refused once the batch has finished."""
    return JSON(batch_view(await services.batches.open(bid)))


@router.post(
    "/batches/{bid}/commit",
    operation_id="batches-commit",
    response_model=s.Batch,
    responses=_NOT_FOUND,
)
async def commit_batch(bid: BidPath, services: ServicesDep) -> Response:
    """Commit the batch: no more members join until it is opened again. It finishes once no
    member is pending (at once if none is). Committing it again changes nothing."""
    return JSON(batch_view(await services.batches.commit(bid)))


@router.get(
    "/batches/{bid}", operation_id="batches-get", response_model=s.Batch, responses=_NOT_FOUND
)
async def get_batch(bid: BidPath, services: ServicesDep) -> Response:
    """How the batch stands: its counts, its callbacks and their states, its parent and
    children."""
    return JSON(batch_view(await services.batches.get(bid)))


@admin_router.get("/batches", operation_id="admin-batches-list", response_model=s.BatchPage)
async def list_batches(
    services: ServicesDep,
    cursor: Annotated[
        str | None,
        # A cursor is the bid a page answered as `next`; a NUL, which no text column holds,
        # would reach PostgreSQL and fail there.
        Query(
            min_length=1,
            max_length=rules.BID_MAX_LENGTH,
            pattern=JID_PATTERN,
            description="The `next` of the previous page.",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    unfinished: Annotated[bool, Query(description="Only batches not finished.")] = False,
) -> Response:
    """The batches, newest first."""
    rows = await services.batches.list(cursor, limit + 1, unfinished)
    page = rows[:limit]
    return JSON(
        {
            "batches": [batch_view(r) for r in page],
            "next": page[-1]["bid"] if len(rows) > limit else None,
        }
    )


# Dispatched by werk.api.traffic (FastAPI's router documents it).
TRAFFIC = [TrafficRoute("POST", "/v1/batches", new_batch, "push")]
