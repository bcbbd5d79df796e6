"""The job traffic is dispatched by werk.api.traffic alone: its answers, refusals included, never
go through FastAPI's router, and they are the ones the document and the other routes give."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import fastapi.routing
import pytest

from tests.conftest import InProcess
from tests.integration.admin.test_auth import CONFIG, bearer
from werk.api import admin_routes, batches_routes, jobs_routes, work_routes
from werk.api.traffic import TrafficRoute

_TRAFFIC = ("/v1/fetch", "/v1/ack", "/v1/beat", "/v1/jobs/", "/v1/jobs")


@pytest.fixture(autouse=True)
def fastapi_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths FastAPI solved dependencies for: none of the job traffic (checked after each
    test)."""
    calls: list[str] = []
    real = fastapi.routing.solve_dependencies

    async def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["request"].url.path)
        return await real(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", spy)
    yield calls
    assert not [p for p in calls if p.startswith(_TRAFFIC)], calls


@pytest.mark.parametrize("module", [jobs_routes, work_routes, batches_routes, admin_routes])
def test_each_traffic_route_is_a_documented_route(module: Any) -> None:
    documented = {
        (method, route.path, route.endpoint)
        for route in module.router.routes
        for method in route.methods
    }
    traffic: list[TrafficRoute] = module.TRAFFIC
    assert traffic
    for route in traffic:
        assert (route.method, route.path, route.endpoint) in documented


async def test_job_traffic_bypasses_fastapi(api: InProcess, fastapi_calls: list[str]) -> None:
    r = await api.http.post("/v1/jobs", json={"jobtype": "a", "queue": "d"})
    assert r.status_code == 201, r.text
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "b", "queue": "d"}]})
    assert r.status_code == 201 and r.json()["created"] == 1
    r = await api.http.post("/v1/fetch", json={"queues": ["d"], "wid": "w", "count": 2})
    first, second = r.json()["jobs"]
    r = await api.http.post(f"/v1/jobs/{first['jid']}/ack", json={"lease": first["lease"]})
    assert r.status_code == 204
    r = await api.http.post(f"/v1/jobs/{second['jid']}/extend", json={"lease": second["lease"]})
    assert r.status_code == 200
    r = await api.http.post(
        "/v1/ack", json={"acks": [{"jid": second["jid"], "lease": second["lease"]}]}
    )
    assert r.json() == {"acked": [second["jid"]], "lease_lost": []}
    r = await api.http.post("/v1/beat", json={"wid": "w"})
    assert r.json() == {"state": "running"}
    assert fastapi_calls == []
    # The answers are timed under their route template like any other.
    metrics = (await api.http.get("/metrics")).text
    assert 'route="/v1/jobs/{jid}/ack"' in metrics


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        (b'{"jobtype": ""}', {"content-type": "application/json"}, 422, "invalid_request"),
        (b'{"jobtype": "a"', {"content-type": "application/json"}, 400, "invalid_json"),
        (b'{"jobtype": "a", "x": 1}', {"content-type": "application/json"}, 422, "invalid_request"),
        (b'{"jobtype": "a"}', {"content-type": "text/plain"}, 415, "unsupported_media_type"),
    ],
)
async def test_refusals_are_the_documented_problems(
    api: InProcess,
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    r = await api.http.post("/v1/jobs", content=body, headers=headers)
    assert (r.status_code, r.json()["code"]) == (status, code), r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert (await api.http.get("/v1/info")).json()["totals"]["enqueued"] == 0


async def test_errors_raised_by_the_service_keep_their_problem(
    api: InProcess, fastapi_calls: list[str]
) -> None:
    r = await api.http.post("/v1/jobs/nope/ack", json={"lease": "not-a-lease"})
    assert (r.status_code, r.json()["code"]) == (409, "lease_lost")
    assert fastapi_calls == []


async def test_credentials_are_checked_the_same_way(
    make_api: Callable[..., Any], fastapi_calls: list[str]
) -> None:
    api: InProcess = await make_api(tokens=CONFIG, auth_failures_per_minute=2)
    job = {"jobtype": "a"}
    assert (await api.http.post("/v1/jobs", json=job, headers=bearer("push"))).status_code == 201
    assert fastapi_calls == []
    r = await api.http.post("/v1/jobs", json=job, headers=bearer("work"))
    assert (r.status_code, r.json()["code"]) == (403, "forbidden")
    r = await api.http.post("/v1/jobs", json=job)
    assert (r.status_code, r.json()["code"]) == (401, "unauthorized")
    # Two unknown tokens block the client: each failure was counted once, and a blocked client
    # is refused even with a good token.
    for _ in range(2):
        r = await api.http.post("/v1/jobs", json=job, headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401
    r = await api.http.post("/v1/jobs", json=job, headers=bearer("push"))
    assert (r.status_code, r.json()["code"]) == (429, "too_many_auth_failures")


async def test_oversized_and_unsized_bodies_meet_the_limit(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(max_body_bytes=1024)
    big = {"jobtype": "a", "args": ["x" * 2000]}
    r = await api.http.post("/v1/jobs", json=big)
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large")

    async def chunked() -> Any:  # no Content-Length: streamed
        yield b'{"jobtype": "a", "args": ["'
        yield b"x" * 2000
        yield b'"]}'

    r = await api.http.post(
        "/v1/jobs", content=chunked(), headers={"content-type": "application/json"}
    )
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large")
    small = await api.http.post("/v1/jobs", json={"jobtype": "a", "args": ["x" * 100]})
    assert small.status_code == 201
    assert (await api.http.get("/v1/info")).json()["totals"]["enqueued"] == 1


@pytest.mark.parametrize("sized", [True, False])
async def test_prefer_return_minimal_with_and_without_a_length(api: InProcess, sized: bool) -> None:
    body = b'{"jobs": [{"jobtype": "a", "jid": "both-paths-1"}]}'

    async def streamed() -> Any:  # no Content-Length
        yield body

    r = await api.http.post(
        "/v1/jobs/batch",
        content=body if sized else streamed(),
        headers={"content-type": "application/json", "prefer": "return=minimal"},
    )
    assert r.status_code == 201, r.text
    assert r.json() == {"jids": ["both-paths-1"], "created": 1, "existed": []}
    assert r.headers["preference-applied"] == "return=minimal"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/jobs/bad%20jid/ack", 422),  # not a jid
        ("/v1/jobs/a/b/ack", 404),  # not one path segment
    ],
)
async def test_a_jid_in_the_path_is_checked(api: InProcess, path: str, status: int) -> None:
    r = await api.http.post(path, json={"lease": "x"})
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"


async def test_a_wrong_method_on_a_traffic_path_is_405(api: InProcess) -> None:
    r = await api.http.get("/v1/fetch")
    assert (r.status_code, r.headers["allow"]) == (405, "POST")
