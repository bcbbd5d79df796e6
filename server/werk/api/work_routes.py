"""Workers fetch, settle and extend jobs, and beat."""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from werk.api import schemas
from werk.api.disconnect import disconnection
from werk.api.responses import JSON
from werk.api.traffic import Traffic, TrafficRoute
from werk.errors import InvalidRequest
from werk.http.deps import ServicesDep, SettingsDep
from werk.services.views import fetched_view

router = APIRouter(prefix="/v1", tags=["work"], responses=schemas.INVALID_REQUEST)

# Also when the job is no longer stored (an ack repeated after its answer was lost).
_LEASE_LOST: dict[int | str, dict[str, Any]] = {
    409: {"model": schemas.Problem, "description": "lease_lost"},
}
_RESULT_TOO_LARGE: dict[int | str, dict[str, Any]] = {
    413: {"model": schemas.Problem, "description": "result_too_large (or payload_too_large)"},
}


@router.post("/fetch", operation_id="work-fetch", response_model=schemas.Fetched)
async def fetch(
    body: Traffic[schemas.Fetch], services: ServicesDep, settings: SettingsDep, request: Request
) -> Response:
    """Reserve up to `count` jobs from `queues` (in order); long-poll up to `wait` seconds.
    A client that disconnects while waiting gets nothing reserved for it."""
    wait = min(body.wait, settings.max_fetch_wait)
    # Only a long poll watches for the client leaving (a fetch that does not wait needs no task).
    watch = disconnection(request.receive) if wait > 0 else contextlib.nullcontext(None)
    async with watch as gone:
        rows = await services.claim.fetch(body.queues, body.wid, body.count, wait, gone)
    return JSON({"jobs": [fetched_view(r) for r in rows]})


@router.post(
    "/jobs/{jid}/ack",
    operation_id="work-ack",
    status_code=204,
    responses={**_LEASE_LOST, **_RESULT_TOO_LARGE},
)
async def ack(
    body: Traffic[schemas.Ack], services: ServicesDep, jid: schemas.JidInPath
) -> Response:
    """The attempt succeeded: the job is completed, and deleted unless it is kept (pushed with
    `keep_result_for`), in which case `result` is stored with it."""
    await services.settle.ack(jid, body.lease, body.result)
    return Response(status_code=204)


@router.post(
    "/ack",
    operation_id="work-ack-batch",
    response_model=schemas.AckBatchResult,
    responses=_RESULT_TOO_LARGE,
)
async def ack_batch(
    body: Traffic[schemas.AckBatch], services: ServicesDep, settings: SettingsDep
) -> Response:
    """Ack many jobs at once; jobs whose lease is not current are listed, not acked (of a job
    named with its current lease and another, the current lease's result is stored). A result
    too large refuses the whole request (413), acking nothing."""
    if len(body.acks) > settings.max_batch:
        raise InvalidRequest(
            f"a batch ack holds at most {settings.max_batch} acks; this one has {len(body.acks)}",
            errors=[{"loc": "acks", "message": f"at most {settings.max_batch} items"}],
        )
    acked, lost = await services.settle.ack_many(body.pairs(), body.results() or None)
    return JSON({"acked": acked, "lease_lost": lost})


@router.post(
    "/jobs/{jid}/fail",
    operation_id="work-fail",
    response_model=schemas.FailResult,
    responses=_LEASE_LOST,
)
async def fail(
    body: Traffic[schemas.FailReport], services: ServicesDep, jid: schemas.JidInPath
) -> Response:
    """The attempt failed: retry after the backoff (or `retry_in`), or dead/discarded."""
    result = await services.settle.fail(
        jid,
        body.lease,
        errtype=body.errtype or "unknown",
        message=body.message,
        backtrace=body.backtrace,
        retry_in=body.retry_in,
        no_retry=body.retry is False,
    )
    return JSON({"jid": result.jid, "state": result.outcome.value, "next_at": result.next_at})


@router.post(
    "/jobs/{jid}/extend",
    operation_id="work-extend",
    response_model=schemas.Extended,
    responses=_LEASE_LOST,
)
async def extend(
    body: Traffic[schemas.Extend], services: ServicesDep, jid: schemas.JidInPath
) -> Response:
    """Extend the lease (by `reserve_for`, else the job's own) and optionally checkpoint."""
    expires = await services.settle.extend(
        jid,
        body.lease,
        reserve_for=body.reserve_for,
        progress=body.progress,
        set_progress=body.progress is not None,
    )
    return JSON({"jid": jid, "lease_expires_at": expires})


@router.post("/beat", operation_id="work-beat", response_model=schemas.BeatReply)
async def beat(body: Traffic[schemas.Beat], services: ServicesDep) -> Response:
    """Heartbeat of a worker process; the answer says whether to keep running, quiet or stop."""
    state = await services.workers.beat(
        body.wid,
        hostname=body.hostname,
        pid=body.pid,
        labels=body.labels,
        rss_kb=body.rss_kb,
        current_state=body.current_state,
    )
    return JSON({"state": state.value})


# Dispatched by werk.api.traffic (FastAPI's router documents them).
TRAFFIC = [
    TrafficRoute("POST", "/v1/fetch", fetch, "work"),
    TrafficRoute("POST", "/v1/jobs/{jid}/ack", ack, "work"),
    TrafficRoute("POST", "/v1/ack", ack_batch, "work"),
    TrafficRoute("POST", "/v1/jobs/{jid}/fail", fail, "work"),
    TrafficRoute("POST", "/v1/jobs/{jid}/extend", extend, "work"),
    TrafficRoute("POST", "/v1/beat", beat, "work"),
]
