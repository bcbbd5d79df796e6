"""What a web page may not do to a server on localhost, and the host names a server answers to:
cross-site state changes and foreign Host values are refused on every path (the direct job
routes, FastAPI's routes, the dashboard), as is a request with more than one Authorization
header."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from tests.conftest import InProcess
from tests.integration.admin.test_auth import CONFIG, TOKENS, bearer
from tests.support.server import ServerProcess
from werk.config import Settings

CROSS_SITE = [
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
    {"Origin": "http://[::1"},
    {"Origin": "http://127.0.0.1:8080"},  # another page on this machine
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "cross-site", "Origin": "http://werk.test"},
]
SAME_SITE = [
    {},  # curl and the SDKs send neither
    {"Origin": "http://werk.test"},
    {"Sec-Fetch-Site": "same-origin", "Origin": "http://werk.test"},
    {"Sec-Fetch-Site": "none"},
]


async def _arrange(api: InProcess) -> dict[str, Any]:
    """A worker, a job held by it, a job waiting on the same queue."""
    assert (await api.http.post("/v1/beat", json={"wid": "w1"})).status_code == 200
    for body in ({"jobtype": "held", "queue": "q"}, {"jobtype": "waiting", "queue": "q"}):
        assert (await api.http.post("/v1/jobs", json=body)).status_code == 201
    r = await api.http.post("/v1/fetch", json={"queues": ["q"], "wid": "w1", "count": 1})
    (held,) = r.json()["jobs"]
    r = await api.http.get("/v1/jobs", params={"state": "available"})
    (waiting,) = r.json()["jobs"]
    return {"held": held, "waiting": waiting["jid"]}


def _mutations(jobs: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """Every kind of change, job traffic (served without FastAPI) and admin."""
    held, waiting = jobs["held"], jobs["waiting"]
    ack = {"jid": held["jid"], "lease": held["lease"]}
    return [
        ("POST", "/v1/jobs", {"jobtype": "x", "queue": "q"}),
        ("POST", "/v1/jobs/batch", {"jobs": [{"jobtype": "x", "queue": "q"}]}),
        ("POST", f"/v1/jobs/{held['jid']}/extend", {"lease": held["lease"]}),
        ("POST", "/v1/beat", {"wid": "w2"}),
        ("POST", f"/v1/jobs/{held['jid']}/ack", {"lease": held["lease"]}),
        ("POST", "/v1/ack", {"acks": [ack]}),
        ("POST", f"/v1/jobs/{waiting}/kill", None),
        ("DELETE", f"/v1/jobs/{waiting}", None),
        ("POST", "/v1/fetch", {"queues": ["q"], "wid": "w1", "count": 10}),
        ("POST", "/v1/queues/q/pause", None),
        ("DELETE", "/v1/queues/q/jobs", None),
        ("POST", "/v1/jobs/kill", {"state": "available"}),
        ("POST", "/v1/workers/w1/terminate", None),
        ("POST", "/v1/workers/terminate", None),
    ]


async def _snapshot(api: InProcess) -> Any:
    info = (await api.http.get("/v1/info")).json()
    jobs = (await api.http.get("/v1/jobs")).json()["jobs"]
    workers = (await api.http.get("/v1/workers")).json()["workers"]
    queue = (await api.http.get("/v1/queues/q")).json()
    return (
        info["totals"],
        info["states"],
        sorted((j["jid"], j["state"]) for j in jobs),
        sorted((w["wid"], w["state"]) for w in workers),
        queue,
    )


async def _send(
    http: httpx.AsyncClient, method: str, path: str, body: Any, headers: dict[str, str]
) -> httpx.Response:
    return await http.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize("headers", CROSS_SITE)
async def test_no_cross_site_change_without_tokens(api: InProcess, headers: dict[str, str]) -> None:
    jobs = await _arrange(api)
    before = await _snapshot(api)
    for method, path, body in _mutations(jobs):
        r = await _send(api.http, method, path, body, headers)
        assert (r.status_code, r.json()["code"]) == (403, "cross_site_request"), (path, r.text)
        assert r.headers["content-type"] == "application/problem+json"
    assert await _snapshot(api) == before
    r = await api.http.get(f"/v1/jobs/{jobs['held']['jid']}", headers=headers)  # only reads
    assert r.status_code == 200 and r.json()["state"] == "active"


@pytest.mark.parametrize("headers", SAME_SITE)
async def test_same_origin_and_headerless_changes_pass(
    api: InProcess, headers: dict[str, str]
) -> None:
    jobs = await _arrange(api)
    for method, path, body in _mutations(jobs):
        r = await _send(api.http, method, path, body, headers)
        assert r.status_code < 300, (path, r.text)
    workers = (await api.http.get("/v1/workers")).json()["workers"]
    assert {w["state"] for w in workers} == {"terminate"}


async def test_a_foreign_host_is_refused_on_every_route(api: InProcess) -> None:
    jid = (await api.http.post("/v1/jobs", json={"jobtype": "a"})).json()["jid"]
    foreign = {"Host": "evil.example:7777"}
    for method, path, body in [
        ("GET", "/v1/jobs", None),
        ("GET", f"/v1/jobs/{jid}", None),
        ("GET", "/v1/info", None),
        ("GET", "/", None),  # the dashboard
        ("POST", "/v1/jobs", {"jobtype": "b"}),
        ("POST", "/v1/fetch", {"queues": ["default"], "wid": "w"}),
        ("POST", f"/v1/jobs/{jid}/kill", None),
    ]:
        r = await _send(api.http, method, path, body, foreign)
        assert (r.status_code, r.json()["code"]) == (421, "host_not_allowed"), (path, r.text)
        assert r.headers["content-type"] == "application/problem+json"
    info = (await api.http.get("/v1/info")).json()
    assert (info["totals"]["enqueued"], info["states"]) == (1, {"available": 1})
    # Health probes address a node by whatever name: they stay open.
    assert (await api.http.get("/livez", headers=foreign)).status_code == 200
    r = await api.http.get("/v1/jobs", headers=[("Host", "werk.test"), ("Host", "evil.example")])
    assert (r.status_code, r.json()["code"]) == (421, "host_not_allowed")


async def test_the_default_host_names(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(allowed_hosts=[], host="127.0.0.2")
    for host in ("localhost", "LOCALHOST:7420", "127.0.0.1:7420", "[::1]:7420", "127.0.0.2:80"):
        r = await api.http.get("/v1/jobs", headers={"Host": host})
        assert r.status_code == 200, host
    for host in ("werk.test", "127.0.0.3:7420", "localhost.evil.example", "[::2]:7420"):
        r = await api.http.get("/v1/jobs", headers={"Host": host})
        assert (r.status_code, r.json()["code"]) == (421, "host_not_allowed"), host
    # A page served by another port of this machine is another site.
    r = await api.http.post(
        "/v1/queues/q/pause", headers={"Host": "localhost:7420", "Origin": "http://localhost:3000"}
    )
    assert (r.status_code, r.json()["code"]) == (403, "cross_site_request")


async def test_a_listed_host_is_admitted(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(allowed_hosts=["jobs.internal"])
    r = await api.http.post("/v1/jobs", json={"jobtype": "a"}, headers={"Host": "jobs.internal"})
    assert r.status_code == 201
    # Behind a proxy that rewrites Host, a page on a listed name may still act.
    r = await api.http.post(
        "/v1/queues/q/pause",
        headers={"Host": "127.0.0.1:7420", "Origin": "https://jobs.internal"},
    )
    assert r.status_code == 200
    r = await api.http.get("/v1/jobs", headers={"Host": "werk.test"})  # no longer listed
    assert (r.status_code, r.json()["code"]) == (421, "host_not_allowed")


async def test_any_host_when_listed_as_star(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(allowed_hosts=["*"])
    r = await api.http.get("/v1/jobs", headers={"Host": "evil.example"})
    assert r.status_code == 200
    r = await api.http.post(
        "/v1/jobs",
        json={"jobtype": "a"},
        headers={"Host": "evil.example", "Origin": "http://elsewhere.example"},
    )
    assert (r.status_code, r.json()["code"]) == (403, "cross_site_request")


async def test_with_tokens_only_a_listed_host_is_checked(make_api: Callable[..., Any]) -> None:
    # Tokens keep other sites' pages out: no Host list of their own, no cross-site rule.
    api: InProcess = await make_api(tokens=CONFIG, allowed_hosts=[])
    headers = {**bearer("admin"), "Host": "evil.example", "Origin": "http://evil.example"}
    assert (await api.http.get("/v1/jobs", headers=headers)).status_code == 200
    r = await api.http.post("/v1/jobs", json={"jobtype": "a"}, headers=headers)
    assert r.status_code == 201
    # A configured list applies with tokens too.
    listed: InProcess = await make_api(tokens=CONFIG, allowed_hosts=["werk.test"])
    r = await listed.http.get("/v1/jobs", headers={**bearer("admin"), "Host": "evil.example"})
    assert (r.status_code, r.json()["code"]) == (421, "host_not_allowed")
    assert (await listed.http.get("/v1/jobs", headers=bearer("admin"))).status_code == 200


@pytest.mark.parametrize("first", ["push", "admin", "nope"])
async def test_two_authorization_headers_are_refused_on_every_path(
    make_api: Callable[..., Any], first: str
) -> None:
    api: InProcess = await make_api(tokens=CONFIG, auth_failures_per_minute=1000)
    token = TOKENS.get(first, "nope-0123456789")
    for second in ("admin", "push"):
        both = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {TOKENS[second]}")]
        for method, path, body in [
            ("POST", "/v1/jobs", {"jobtype": "a"}),  # served without FastAPI
            ("GET", "/v1/jobs", None),
            ("POST", "/v1/queues/q/pause", None),
        ]:
            r = await api.http.request(method, path, json=body, headers=both)
            assert (r.status_code, r.json()["code"]) == (401, "ambiguous_credentials"), path
            assert r.headers["www-authenticate"] == 'Bearer realm="werk"'
    info = (await api.http.get("/v1/info", headers=bearer("admin"))).json()
    assert (info["totals"]["enqueued"], info["states"]) == (0, {})
    r = await api.http.get("/v1/queues/q", headers=bearer("admin"))
    assert r.json()["paused"] is False


async def test_two_authorization_headers_are_refused_without_tokens(api: InProcess) -> None:
    both = [("Authorization", "Bearer a"), ("Authorization", "Bearer b")]
    r = await api.http.post("/v1/jobs", json={"jobtype": "a"}, headers=both)
    assert (r.status_code, r.json()["code"]) == (401, "ambiguous_credentials")
    assert (await api.http.get("/v1/info")).json()["totals"]["enqueued"] == 0


def test_allowed_hosts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WERK_ALLOWED_HOSTS", " Jobs.Internal, [::1] ,10.0.0.5,")
    assert Settings().allowed_hosts == ["jobs.internal", "::1", "10.0.0.5"]
    for bad in ("jobs.internal:7420", "a b", "http://jobs.internal", "[::1]:7420"):
        monkeypatch.setenv("WERK_ALLOWED_HOSTS", bad)
        with pytest.raises(ValidationError, match="not a host name"):
            Settings()


async def test_a_served_tokenless_server_keeps_pages_out(werk_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=werk_server.url) as http:
        r = await http.get("/v1/jobs", headers={"Host": f"evil.example:{werk_server.port}"})
        assert (r.status_code, r.json()["code"]) == (421, "host_not_allowed")
        r = await http.post(
            "/v1/jobs", json={"jobtype": "a"}, headers={"Origin": "http://evil.example"}
        )
        assert (r.status_code, r.json()["code"]) == (403, "cross_site_request")
        both = [("Authorization", "Bearer a"), ("Authorization", "Bearer b")]
        r = await http.post("/v1/jobs", json={"jobtype": "a"}, headers=both)
        assert (r.status_code, r.json()["code"]) == (401, "ambiguous_credentials")
        assert (await http.get("/v1/info")).json()["totals"]["enqueued"] == 0
        origin = {"Origin": werk_server.url}
        assert (await http.post("/v1/jobs", json={"jobtype": "a"}, headers=origin)).is_success
        assert (await http.post("/v1/jobs", json={"jobtype": "a"})).status_code == 201
