"""The admin API: browse and act on jobs (one or in bulk), queues, workers, history.
Routes translate; services/admin.py and services/queues.py decide."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from starlette.responses import Response

from werk.api import admin_schemas as s
from werk.api import schemas
from werk.api.responses import JSON
from werk.api.traffic import Traffic, TrafficRoute
from werk.domain.job import QUEUE_PATTERN, WorkerState
from werk.domain.json_values import NO_NUL
from werk.http.deps import ServicesDep
from werk.services.admin import JobAction, JobQuery
from werk.services.container import Services
from werk.services.views import job_view

router = APIRouter(prefix="/v1", tags=["admin"], responses=schemas.INVALID_REQUEST)

JidPath = schemas.JidInPath
QueuePath = Annotated[str, Path(pattern=QUEUE_PATTERN)]
QueueQuery = Annotated[str | None, Query(pattern=QUEUE_PATTERN)]
WidPath = Annotated[str, Path(min_length=1, max_length=100, pattern=NO_NUL)]
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": schemas.Problem, "description": "job_not_found"}
}
_ACTION_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": schemas.Problem, "description": "job_not_found"},
    409: {"model": schemas.Problem, "description": "job_state_conflict"},
}


def queue_view(q: Any) -> dict[str, Any]:
    return {
        "name": q.name,
        "size": q.size,
        "latency_seconds": q.latency_seconds,
        "paused": q.paused,
        "counts": q.counts,
    }


def worker_view(w: Any) -> dict[str, Any]:
    return {
        k: w[k]
        for k in (
            "wid", "hostname", "pid", "labels", "rss_kb", "reported_state", "state",
            "started_at", "last_beat_at", "gone_at", "busy",
        )
    }  # fmt: skip


# -- jobs ---------------------------------------------------------------------------------


@router.get("/jobs", operation_id="admin-jobs-list", response_model=s.JobPage)
async def list_jobs(
    services: ServicesDep,
    state: s.StateFilter | None = None,
    queue: QueueQuery = None,
    jobtype: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
    q: Annotated[
        str | None,
        Query(max_length=200, pattern=NO_NUL, description=s.Q_DESCRIPTION),
    ] = None,
    failed: bool | None = None,
    order: s.Order = "newest",
    cursor: Annotated[str | None, Query(max_length=500, pattern=r"^[A-Za-z0-9_-]*$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> Response:
    """Jobs matching the filters, a page at a time (keyset pagination: pages cost the same
    however deep). Jobs that are not available come by creation time, newest or oldest first;
    the available jobs come after them in the order workers take them (highest priority, then
    first enqueued): `oldest` lists the next in line first, `newest` the last."""
    page = await services.admin.list_jobs(
        JobQuery(state=state, queue=queue, jobtype=jobtype, text=q, failed=failed),
        cursor=cursor,
        limit=limit,
        newest_first=order == "newest",
    )
    return JSON({"jobs": [job_view(r) for r in page.jobs], "next_cursor": page.next_cursor})


async def _act(
    services: Services, action: Literal["retry", "kill", "cancel"], jid: str
) -> Response:
    job = await services.admin.act(action, jid)
    return JSON(job_view(job))


@router.post(
    "/jobs/{jid}/retry",
    operation_id="admin-jobs-retry",
    response_model=schemas.Job,
    responses=_ACTION_ERRORS,
)
async def retry_job(services: ServicesDep, jid: JidPath) -> Response:
    """Run a dead, expired, skipped or scheduled (incl. retrying) job now: it becomes available."""
    return await _act(services, "retry", jid)


@router.post(
    "/jobs/{jid}/kill",
    operation_id="admin-jobs-kill",
    response_model=schemas.Job,
    responses=_ACTION_ERRORS,
)
async def kill_job(services: ServicesDep, jid: JidPath) -> Response:
    """Move a scheduled, available, waiting or active job to dead (an active one loses its
    lease)."""
    return await _act(services, "kill", jid)


@router.post(
    "/jobs/{jid}/cancel",
    operation_id="admin-jobs-cancel",
    response_model=schemas.Job,
    responses=_ACTION_ERRORS,
)
async def cancel_job(services: ServicesDep, jid: JidPath) -> Response:
    """Cancel a scheduled, available, waiting or active job: it will not run (again)."""
    return await _act(services, "cancel", jid)


@router.delete(
    "/jobs/{jid}", operation_id="admin-jobs-delete", status_code=204, responses=_NOT_FOUND
)
async def delete_job(services: ServicesDep, jid: JidPath) -> Response:
    """Delete a job in any state."""
    await services.admin.delete(jid)
    return Response(status_code=204)


async def _bulk(services: Services, action: JobAction, body: s.BulkAction) -> Response:
    query = JobQuery(
        state=body.state, queue=body.queue, jobtype=body.jobtype, text=body.q, failed=body.failed
    )
    changed = await services.admin.act_bulk(action, query, limit=body.limit)
    return JSON({"action": action, "changed": changed, "more": changed == body.limit})


@router.post("/jobs/retry", operation_id="admin-jobs-retry-bulk", response_model=s.BulkResult)
async def retry_jobs(body: Traffic[s.BulkAction], services: ServicesDep) -> Response:
    """Retry now every matching dead, expired, skipped or scheduled job, up to `limit`."""
    return await _bulk(services, "retry", body)


@router.post("/jobs/kill", operation_id="admin-jobs-kill-bulk", response_model=s.BulkResult)
async def kill_jobs(body: Traffic[s.BulkAction], services: ServicesDep) -> Response:
    """Kill every matching scheduled, available, waiting or active job, up to `limit`."""
    return await _bulk(services, "kill", body)


@router.post("/jobs/cancel", operation_id="admin-jobs-cancel-bulk", response_model=s.BulkResult)
async def cancel_jobs(body: Traffic[s.BulkAction], services: ServicesDep) -> Response:
    """Cancel every matching scheduled, available, waiting or active job, up to `limit`."""
    return await _bulk(services, "cancel", body)


@router.post("/jobs/delete", operation_id="admin-jobs-delete-bulk", response_model=s.BulkResult)
async def delete_jobs(body: Traffic[s.BulkAction], services: ServicesDep) -> Response:
    """Delete every matching job, up to `limit`."""
    return await _bulk(services, "delete", body)


# -- queues -------------------------------------------------------------------------------


@router.get("/queues", operation_id="admin-queues-list", response_model=s.QueueList)
async def list_queues(services: ServicesDep) -> Response:
    """Every queue with jobs (or paused/resumed once): size, latency, counts, paused."""
    return JSON({"queues": [queue_view(q) for q in await services.queues.list()]})


@router.get("/queues/{queue}", operation_id="admin-queues-get", response_model=s.QueueDetail)
async def get_queue(services: ServicesDep, queue: QueuePath) -> Response:
    """One queue (a name never seen reads as empty)."""
    return JSON(queue_view(await services.queues.get(queue)))


@router.post(
    "/queues/{queue}/pause", operation_id="admin-queues-pause", response_model=s.QueueDetail
)
async def pause_queue(services: ServicesDep, queue: QueuePath) -> Response:
    """Stop handing out the queue's jobs; pushes are still accepted."""
    return JSON(queue_view(await services.queues.pause(queue)))


@router.post(
    "/queues/{queue}/resume", operation_id="admin-queues-resume", response_model=s.QueueDetail
)
async def resume_queue(services: ServicesDep, queue: QueuePath) -> Response:
    """Hand out the queue's jobs again."""
    return JSON(queue_view(await services.queues.resume(queue)))


@router.delete(
    "/queues/{queue}/jobs", operation_id="admin-queues-clear", response_model=s.QueueCleared
)
async def clear_queue(services: ServicesDep, queue: QueuePath) -> Response:
    """Delete the queue's available jobs (active, scheduled and dead jobs stay)."""
    return JSON({"queue": queue, "deleted": await services.queues.clear(queue)})


# -- workers ------------------------------------------------------------------------------


@router.get("/workers", operation_id="admin-workers-list", response_model=s.WorkerList)
async def list_workers(services: ServicesDep, include_gone: bool = False) -> Response:
    """Worker processes with their last beat, instructed state and the jobs they hold."""
    rows = await services.admin.workers(include_gone=include_gone)
    return JSON({"workers": [worker_view(w) for w in rows]})


_WORKER_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": schemas.Problem, "description": "worker_not_found"}
}


@router.post(
    "/workers/{wid:path}/quiet",
    operation_id="admin-workers-quiet",
    response_model=s.WorkerSignalled,
    responses=_WORKER_NOT_FOUND,
)
async def quiet_worker(services: ServicesDep, wid: WidPath) -> Response:
    """Ask the worker to fetch no more jobs (it finishes what it holds); its next beat says so."""
    state = await services.admin.signal(wid, WorkerState.QUIET)
    return JSON({"wid": wid, "state": state})


@router.post(
    "/workers/{wid:path}/terminate",
    operation_id="admin-workers-terminate",
    response_model=s.WorkerSignalled,
    responses=_WORKER_NOT_FOUND,
)
async def terminate_worker(services: ServicesDep, wid: WidPath) -> Response:
    """Ask the worker to stop; its next beat says so."""
    state = await services.admin.signal(wid, WorkerState.TERMINATE)
    return JSON({"wid": wid, "state": state})


@router.post(
    "/workers/quiet", operation_id="admin-workers-quiet-all", response_model=s.WorkersSignalled
)
async def quiet_workers(services: ServicesDep) -> Response:
    """Quiet every live worker."""
    return JSON({"changed": await services.admin.signal_all(WorkerState.QUIET)})


@router.post(
    "/workers/terminate",
    operation_id="admin-workers-terminate-all",
    response_model=s.WorkersSignalled,
)
async def terminate_workers(services: ServicesDep) -> Response:
    """Terminate every live worker."""
    return JSON({"changed": await services.admin.signal_all(WorkerState.TERMINATE)})


# -- history ------------------------------------------------------------------------------


@router.get("/history", operation_id="admin-history", response_model=s.History)
async def history(
    services: ServicesDep,
    days: Annotated[int, Query(ge=1, le=366)] = 30,
    queue: QueueQuery = None,
) -> Response:
    """Processed, failed and pushed per UTC day, oldest first (survives job deletion)."""
    return JSON({"days": await services.admin.history(days, queue)})


# Dispatched by werk.api.traffic (FastAPI's router documents them).
TRAFFIC = [
    TrafficRoute("POST", "/v1/jobs/retry", retry_jobs, "admin"),
    TrafficRoute("POST", "/v1/jobs/kill", kill_jobs, "admin"),
    TrafficRoute("POST", "/v1/jobs/cancel", cancel_jobs, "admin"),
    TrafficRoute("POST", "/v1/jobs/delete", delete_jobs, "admin"),
]
