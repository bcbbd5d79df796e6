"""Producers push jobs and anyone may read one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from starlette.requests import Request
from starlette.responses import Response

from werk.api import schemas
from werk.api.disconnect import disconnection
from werk.api.responses import JSON
from werk.api.traffic import Traffic, TrafficRoute
from werk.domain import job as rules
from werk.domain.bodies import JobPush
from werk.domain.job import PushResult
from werk.errors import InvalidRequest
from werk.http.deps import ServicesDep, SettingsDep
from werk.services.views import dependency_view, job_view, pushed_view, result_view

router = APIRouter(prefix="/v1", tags=["jobs"], responses=schemas.INVALID_REQUEST)


_PREFER = (
    "`return=minimal` (RFC 7240): answer a batch without `jobs` (the jids, `created` and "
    "`existed` only). The answer then says `Preference-Applied: return=minimal`. Other "
    "preferences are ignored."
)


def wants_minimal(prefer: str) -> bool:
    """Whether a Prefer header (RFC 7240: comma-separated, parameters after ';') holds
    return=minimal."""
    for item in prefer.split(","):
        name, _, value = item.split(";", 1)[0].partition("=")
        if name.strip().lower() == "return" and value.strip().strip('"').lower() == "minimal":
            return True
    return False


@router.post(
    "/jobs",
    operation_id="jobs-push",
    status_code=201,
    response_model=schemas.PushedJob,
    responses={
        200: {
            "model": schemas.PushedJob,
            "description": "Another job holds the unique key and `on_conflict` is `existing` or "
            "`replace`: that job (after the replacement), with `duplicate: true`.",
        },
        404: {"model": schemas.Problem, "description": "batch_not_found"},
        409: {
            "model": schemas.NotUniqueProblem,
            "description": "not_unique (naming the holder), batch_committed or batch_finished",
        },
    },
)
async def push(body: Traffic[JobPush], services: ServicesDep) -> Response:
    """Push one job; answered with the job as stored. Pushing a jid that exists stores nothing
    new and is answered like the first push (201), with `created: false`. A unique job whose
    key another job holds is answered as its `on_conflict` says: 409 `not_unique` naming the
    holder (`reject`), or 200 with the holder and `duplicate: true` (`existing`, `replace`)."""
    result = await services.push.push_one(body)
    view = pushed_view(result)
    view["created"] = result.created
    if result.conflict is not None:
        view["duplicate"] = True
        return JSON(view, status_code=200)
    return JSON(view, status_code=201)


@router.post(
    "/jobs/batch",
    operation_id="jobs-push-batch",
    status_code=201,
    response_model=schemas.JobBatchPushed,
    responses={
        404: {"model": schemas.Problem, "description": "batch_not_found"},
        409: {"model": schemas.Problem, "description": "batch_committed or batch_finished"},
    },
)
async def push_batch(
    body: Traffic[schemas.JobBatchPush],
    services: ServicesDep,
    settings: SettingsDep,
    prefer: Annotated[schemas.Prefer, Header(description=_PREFER)] = None,
) -> Response:
    """Push many jobs in one transaction: all are stored, or none (per-item errors reported).
    Answers with the jids, how many were new and which existed, and the stored jobs (not with
    `Prefer: return=minimal`). A batch may be a graph: items name each other by `ref` in
    `depends_on`; `refs` maps each ref to its jid. A cycle is refused (422
    `dependency_cycle`), and so is a dependency neither in the batch nor stored (422
    `dependency_not_found`)."""
    if len(body.jobs) > settings.max_batch:
        raise InvalidRequest(
            f"a batch holds at most {settings.max_batch} jobs; this one has {len(body.jobs)}",
            errors=[{"loc": "jobs", "message": f"at most {settings.max_batch} items"}],
        )
    specs = body.jobs
    if prefer is not None and wants_minimal(prefer):
        jids, existed, unique = await services.push.push_jids(specs)
        answer = {
            "jids": jids,
            "created": sum(r.created for r in unique) if unique else len(jids) - len(existed),
            "existed": existed,
        }
        _add_conflicts(answer, unique)
        _add_refs(answer, specs, jids)
        return JSON(answer, status_code=201, headers={"Preference-Applied": "return=minimal"})
    results = await services.push.push(specs)
    jobs = [pushed_view(r) for r in results]
    answer = {
        "jids": [j["jid"] for j in jobs],
        "created": sum(r.created for r in results),
        "existed": [
            j["jid"]
            for j, r in zip(jobs, results, strict=True)
            if not r.created and r.conflict is None
        ],
        "jobs": jobs,
    }
    _add_conflicts(answer, results)
    _add_refs(answer, specs, [j["jid"] for j in jobs])
    return JSON(answer, status_code=201)


def _add_refs(answer: dict[str, Any], specs: Sequence[JobPush], jids: Sequence[str]) -> None:
    """Each item's ref mapped to its jid, if any item has one."""
    refs = {s.ref: jid for s, jid in zip(specs, jids, strict=True) if s.ref is not None}
    if refs:
        answer["refs"] = refs


def _add_conflicts(answer: dict[str, Any], results: Sequence[PushResult]) -> None:
    """The items whose unique key another job held, if any."""
    conflicts = [
        {"index": i, "existing_jid": r.job["jid"], "on_conflict": r.conflict}
        for i, r in enumerate(results)
        if r.conflict is not None
    ]
    if conflicts:
        answer["conflicts"] = conflicts


@router.get(
    "/jobs/{jid}",
    operation_id="jobs-get",
    response_model=schemas.Job,
    responses={404: {"model": schemas.Problem, "description": "job_not_found"}},
)
async def get(services: ServicesDep, jid: schemas.JidInPath) -> Response:
    """Read a job in any state (completed jobs are deleted at ack unless retention is set)."""
    return JSON(job_view(await services.push.get(jid)))


@router.get(
    "/jobs/{jid}/dependencies",
    operation_id="jobs-dependencies",
    response_model=schemas.DependencyPage,
    responses={404: {"model": schemas.Problem, "description": "job_not_found"}},
)
async def dependencies(
    services: ServicesDep,
    jid: schemas.JidInPath,
    cursor: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=rules.JID_MAX_LENGTH,
            pattern=rules.JID_PATTERN,
            description="The `next` of the previous page (the jid of its last dependency).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """A job's dependencies in jid order, each with how it ended and its result: the whole of
    what a fetch or a read of the job left out when its dependencies' results exceeded the
    answer's budget (`result_omitted`) or they were more than it lists
    (`dependencies_omitted`). A page holds at most `limit` dependencies and the results that
    fit the budget, at least one."""
    page, after = await services.push.dependency_page(jid, cursor, limit)
    return JSON({"dependencies": [dependency_view(e) for e in page], "next": after})


@router.get(
    "/jobs/{jid}/result",
    operation_id="jobs-result",
    response_model=schemas.JobResult,
    responses={404: {"model": schemas.Problem, "description": "job_not_found"}},
)
async def result(
    services: ServicesDep,
    settings: SettingsDep,
    request: Request,
    jid: schemas.JidInPath,
    wait: Annotated[
        float,
        Query(
            ge=0,
            description="Seconds to wait for the job to settle (server maximum applies, "
            "`WERK_MAX_FETCH_WAIT`, 30 by default).",
        ),
    ] = 0,
) -> Response:
    """A job's outcome: its result once completed, its failure once dead (or expired,
    cancelled). With `wait`, answers as soon as the job settles, else when the wait ends (then
    `done` is false). 404 when no such job is stored: a job is deleted at ack unless it was
    pushed with `keep_result_for` (or the server keeps every completed job)."""
    seconds = min(wait, settings.max_fetch_wait)
    if seconds <= 0:
        return JSON(result_view(await services.results.wait(jid, 0)))
    async with disconnection(request.receive) as gone:
        row = await services.results.wait(jid, seconds, gone)
    return JSON(result_view(row))


# Dispatched by werk.api.traffic (FastAPI's router documents them).
TRAFFIC = [
    TrafficRoute("POST", "/v1/jobs", push, "push"),
    TrafficRoute("POST", "/v1/jobs/batch", push_batch, "push"),
]
