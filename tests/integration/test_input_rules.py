"""Hostile and careless input over HTTP: every refusal is a 4xx problem+json with a stable code
that changes nothing, for a body sent with its length and for one streamed without it."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import InProcess
from tests.integration.admin.test_auth import CONFIG, bearer
from tests.support.helpers import sql
from tests.support.server import ServerProcess
from werk.domain import job as rules

JSON = {"content-type": "application/json"}
PATHS = ["sized", "streamed"]


async def post(api: InProcess, url: str, body: bytes, path: str) -> httpx.Response:
    """POST ``body`` sent with its length or streamed without it."""

    async def streamed() -> AsyncIterator[bytes]:
        yield body

    return await api.http.post(url, content=body if path == "sized" else streamed(), headers=JSON)


async def totals(api: InProcess) -> dict[str, Any]:
    info = (await api.http.get("/v1/info")).json()
    return {"totals": info["totals"], "states": info["states"]}


def refused(r: httpx.Response, status: int, code: str) -> None:
    assert (r.status_code, r.json()["code"]) == (status, code), r.text
    assert r.headers["content-type"] == "application/problem+json"


# -- a jid the API accepts is usable in every path -----------------------------------------


NOT_URL_SAFE = [
    "tenant/a/job-0001",
    "../../v1/info",
    "..abcdefgh",
    ".hidden-job",
    "-leading-dash",
    "job 0001 with spaces",
    "job%2F0001",
    "job?x=1&y=2",
    "job#fragment",
    "jöb-00000001",
    "job-0001\x00",
    "job-0001\n",
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("jid", NOT_URL_SAFE)
async def test_a_jid_that_is_no_path_segment_is_refused_at_push(
    api: InProcess, jid: str, path: str
) -> None:
    before = await totals(api)
    one = orjson.dumps({"jobtype": "a", "jid": jid})
    refused(await post(api, "/v1/jobs", one, path), 422, "invalid_request")
    r = await post(api, "/v1/jobs/batch", b'{"jobs": [{"jobtype": "b"}, %s]}' % one, path)
    refused(r, 422, "invalid_request")
    assert "jobs.1.jid" in [e["loc"] for e in r.json()["errors"]]
    assert await totals(api) == before


URL_SAFE = [
    "0b3d4c0e-8f4a-4c8e-9d5e-1a2b3c4d5e6f",  # a UUID
    "01ARZ3NDEKTSV4RRFFQ69G5FAV",  # a ULID
    "2f6a0c8d9e1b4a7c5d3e2f1a",  # Faktory's clients' hex jids
    "tenant:a:job-1",
    "A.b_c~d@e+f=g-h",
    "9" * rules.JID_MAX_LENGTH,
]


@pytest.mark.parametrize("jid", URL_SAFE)
async def test_every_jid_pushed_can_be_named_in_a_path(api: InProcess, jid: str) -> None:
    r = await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": jid, "queue": "safe"})
    assert r.status_code == 201, r.text
    assert (await api.http.get(f"/v1/jobs/{jid}")).json()["jid"] == jid
    (job,) = (await api.http.post("/v1/fetch", json={"queues": ["safe"], "wid": "w"})).json()[
        "jobs"
    ]
    lease = job["lease"]
    r = await api.http.post(f"/v1/jobs/{jid}/extend", json={"lease": lease})
    assert r.status_code == 200 and r.json()["jid"] == jid
    r = await api.http.post(f"/v1/jobs/{jid}/fail", json={"lease": lease, "retry_in": 0})
    assert r.status_code == 200 and r.json()["state"] == "scheduled"
    assert (await api.http.post(f"/v1/jobs/{jid}/retry")).json()["state"] == "available"
    (job,) = (await api.http.post("/v1/fetch", json={"queues": ["safe"], "wid": "w"})).json()[
        "jobs"
    ]
    r = await api.http.post(f"/v1/jobs/{jid}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204, r.text


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("GET", "/v1/jobs/.hidden-job"),
        ("POST", "/v1/jobs/-dash-0001/ack"),
        ("POST", "/v1/jobs/job%200001/fail"),
        ("POST", "/v1/jobs/job%C3%B6-0001/extend"),
        ("POST", "/v1/jobs/" + "a" * (rules.JID_MAX_LENGTH + 1) + "/ack"),
        ("POST", "/v1/jobs/job%3F0001/kill"),
    ],
)
async def test_a_path_jid_outside_the_rule_is_invalid(
    api: InProcess, method: str, url: str
) -> None:
    await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": "kept-job-1"})
    refused(await api.http.request(method, url, json={"lease": "l"}), 422, "invalid_request")
    assert (await api.http.get("/v1/jobs/kept-job-1")).json()["state"] == "available"


def test_the_schema_declares_the_jid_pattern(api: InProcess) -> None:
    doc = api.http._transport.app.openapi()  # type: ignore[attr-defined]

    def patterns(schema: Any) -> set[str]:
        found = {schema["pattern"]} if "pattern" in schema else set()
        for option in schema.get("anyOf", []):
            found |= patterns(option)
        return found

    pushed = doc["components"]["schemas"]["JobPush"]["properties"]["jid"]
    assert patterns(pushed) == {rules.JID_PATTERN}
    for url, method in [
        ("/v1/jobs/{jid}", "get"),
        ("/v1/jobs/{jid}", "delete"),
        ("/v1/jobs/{jid}/ack", "post"),
        ("/v1/jobs/{jid}/fail", "post"),
        ("/v1/jobs/{jid}/extend", "post"),
        ("/v1/jobs/{jid}/retry", "post"),
    ]:
        (param,) = [p for p in doc["paths"][url][method]["parameters"] if p["name"] == "jid"]
        assert patterns(param["schema"]) == {rules.JID_PATTERN}, (url, method)


async def test_a_job_stored_with_an_older_jid_can_still_be_settled(
    api: InProcess, database_url: str
) -> None:
    """The database bounds a jid's length only: a stored jid outside the pattern cannot be
    named in a path, but a batch ack (the jid in the body) settles its job."""
    await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": "old-jid-0", "queue": "old"})
    await sql(database_url, "UPDATE werk_jobs SET jid = 'old jid/0' WHERE jid = 'old-jid-0'")
    (job,) = (await api.http.post("/v1/fetch", json={"queues": ["old"], "wid": "w"})).json()["jobs"]
    assert job["jid"] == "old jid/0"
    r = await api.http.post("/v1/ack", json={"acks": [{"jid": job["jid"], "lease": job["lease"]}]})
    assert r.json() == {"acked": ["old jid/0"], "lease_lost": []}


# -- NUL in admin paths and query strings ------------------------------------------------------


def _cursor(created_at: Any, jid: Any) -> str:
    raw = orjson.dumps([created_at, jid])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


NUL_REQUESTS = [
    ("GET", "/v1/jobs?jobtype=a%00"),
    ("GET", "/v1/jobs?q=a%00"),
    ("GET", "/v1/jobs?queue=a%00"),
    ("GET", "/v1/jobs?cursor=a%00"),
    ("GET", "/v1/jobs?cursor=" + _cursor("2030-01-01T00:00:00+00:00", "abc\x00defg")),
    ("GET", "/v1/history?queue=a%00"),
    ("GET", "/v1/jobs/abc%00defg"),
    ("POST", "/v1/jobs/abc%00defg/retry"),
    ("POST", "/v1/jobs/abc%00defg/kill"),
    ("POST", "/v1/jobs/abc%00defg/cancel"),
    ("DELETE", "/v1/jobs/abc%00defg"),
    ("POST", "/v1/workers/w%00/quiet"),
    ("POST", "/v1/workers/w%00/terminate"),
    ("GET", "/v1/queues/q%00"),
    ("POST", "/v1/queues/q%00/pause"),
    ("POST", "/v1/queues/q%00/resume"),
    ("DELETE", "/v1/queues/q%00/jobs"),
]


@pytest.mark.parametrize(("method", "url"), NUL_REQUESTS)
async def test_nul_in_a_path_or_query_is_invalid_and_changes_nothing(
    api: InProcess, method: str, url: str
) -> None:
    await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": "abc-defg", "queue": "q"})
    await api.http.post("/v1/beat", json={"wid": "w"})
    before = await totals(api)
    refused(await api.http.request(method, url), 422, "invalid_request")
    assert await totals(api) == before
    assert (await api.http.get("/v1/jobs/abc-defg")).json()["state"] == "available"
    (worker,) = (await api.http.get("/v1/workers")).json()["workers"]
    assert worker["state"] == "running"


# -- JSON the parser cannot read ---------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000
UNREADABLE = [
    b'{"jobs": [{"jobtype": "a", "args": ' + DEEP + b"}]}",
    b"[" * 100_000,
    b'{"jobs": [{"jobtype": "a\xff"}]}',
    b'{"jobs": [{"jobtype": "a", "args": [' + b"9" * 5000 + b"]}]}",
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("body", UNREADABLE, ids=["deep", "bare-deep", "not-utf8", "huge-int"])
@pytest.mark.parametrize("url", ["/v1/jobs", "/v1/jobs/batch", "/v1/ack", "/v1/fetch"])
async def test_json_the_parser_cannot_read_is_invalid_json(
    api: InProcess, body: bytes, url: str, path: str
) -> None:
    if url == "/v1/jobs":  # the same trouble in a single job
        body = body.replace(b'{"jobs": [', b"").replace(b"}]}", b"}")
    before = await totals(api)
    refused(await post(api, url, body, path), 400, "invalid_json")
    assert await totals(api) == before


@pytest.mark.parametrize(
    "body", [b'{"jobtype": "a\\ud800"}', b'{"jobtype": "a"'], ids=["lone-surrogate", "cut-short"]
)
async def test_json_cut_short_or_ending_in_a_lone_surrogate_says_which(
    api: InProcess, body: bytes
) -> None:
    """The parser calls both "truncated"; the answer names both causes instead."""
    before = await totals(api)
    r = await api.http.post("/v1/jobs", content=body, headers=JSON)
    refused(r, 400, "invalid_json")
    assert "ends before it is complete, or a string ends in an unpaired surrogate" in r.text
    assert "truncated" not in r.text
    assert await totals(api) == before


def test_a_deep_batch_leaves_the_connection_serving(werk_server: ServerProcess) -> None:
    body = b'{"jobs": [{"jobtype": "a", "args": ' + DEEP + b"}]}"
    with httpx.Client(base_url=werk_server.url) as http:
        r = http.post("/v1/jobs/batch", content=body, headers=JSON)
        refused(r, 400, "invalid_json")
        r = http.post("/v1/jobs/batch", content=b"[" * 100_000, headers=JSON)
        refused(r, 400, "invalid_json")
        assert http.get("/v1/info").json()["totals"]["enqueued"] == 0


# -- settling a job no longer held -------------------------------------------------------------


@pytest.mark.parametrize("retention", [0, 3600])
@pytest.mark.parametrize("path", PATHS)
async def test_settling_an_acked_job_again_is_lease_lost(
    make_api: Callable[..., Any], retention: int, path: str
) -> None:
    """The worker's question is whether its lease is current: an ack repeated after its answer
    was lost reads the same whether the completed job is kept or deleted, and the same as in a
    batch ack."""
    api: InProcess = await make_api(completed_retention=retention)
    await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": "twice-acked"})
    (job,) = (await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w"})).json()[
        "jobs"
    ]
    lease = orjson.dumps({"lease": job["lease"]})
    assert (await post(api, "/v1/jobs/twice-acked/ack", lease, path)).status_code == 204
    before = await totals(api)
    for action in ("ack", "fail", "extend"):
        refused(await post(api, f"/v1/jobs/twice-acked/{action}", lease, path), 409, "lease_lost")
    r = await post(
        api,
        "/v1/ack",
        b'{"acks": [{"jid": "twice-acked", "lease": %s}]}' % (orjson.dumps(job["lease"])),
        path,
    )
    assert r.json() == {"acked": [], "lease_lost": ["twice-acked"]}
    assert await totals(api) == before


async def test_a_lease_for_a_jid_never_stored_is_lease_lost(api: InProcess) -> None:
    r = await api.http.post("/v1/jobs/never-stored/ack", json={"lease": "not-a-lease"})
    refused(r, 409, "lease_lost")
    assert "never-stored" in r.json()["detail"]


# -- what a job shows --------------------------------------------------------------------------


async def test_a_job_dead_by_no_retry_has_no_retries_remaining(api: InProcess) -> None:
    await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": "no-retry-1", "retry": 25})
    (job,) = (await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w"})).json()[
        "jobs"
    ]
    r = await api.http.post(
        "/v1/jobs/no-retry-1/fail", json={"lease": job["lease"], "errtype": "E", "retry": False}
    )
    assert r.json()["state"] == "dead"
    failure = (await api.http.get("/v1/jobs/no-retry-1")).json()["failure"]
    assert (failure["retry_count"], failure["remaining"]) == (1, 0)
    (listed,) = (await api.http.get("/v1/jobs?state=dead")).json()["jobs"]
    assert listed["failure"]["remaining"] == 0
    page = await api.http.get("/jobs/no-retry-1")  # the dashboard's
    assert page.status_code == 200 and "(0 left)" in page.text, page.text


async def test_a_forbidden_request_names_the_scopes_it_needs(make_api: Callable[..., Any]) -> None:
    api: InProcess = await make_api(tokens=CONFIG, auth_failures_per_minute=1000)
    r = await api.http.get("/v1/queues", headers=bearer("push"))
    refused(r, 403, "forbidden")
    assert r.json()["detail"].endswith("this request needs admin"), r.text
    r = await api.http.post("/v1/fetch", json={"queues": ["a"], "wid": "w"}, headers=bearer("push"))
    refused(r, 403, "forbidden")
    assert r.json()["detail"].endswith("this request needs work or admin"), r.text


async def test_a_pattern_is_quoted_as_the_schema_states_it(api: InProcess) -> None:
    """The end-of-text guard the decoder's patterns carry is not the client's concern."""
    r = await api.http.post("/v1/fetch", json={"queues": ["a/b"], "wid": "w"})
    refused(r, 422, "invalid_request")
    (error,) = r.json()["errors"]
    assert error == {
        "loc": "queues.0",
        "message": f"Expected `str` matching regex '{rules.QUEUE_PATTERN}'",
    }


async def test_a_lease_with_nul_is_invalid(api: InProcess) -> None:
    """As every text of a body: NUL is 422, not a lease that was lost."""
    lease = "5b0c\x00"
    r = await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": "lease-nul-1"})
    assert r.status_code == 201
    for url, body in (
        ("/v1/jobs/lease-nul-1/ack", {"lease": lease}),
        ("/v1/jobs/lease-nul-1/fail", {"lease": lease}),
        ("/v1/jobs/lease-nul-1/extend", {"lease": lease}),
        ("/v1/ack", {"acks": [{"jid": "lease-nul-1", "lease": lease}]}),
    ):
        r = await post(api, url, orjson.dumps(body), "sized")
        refused(r, 422, "invalid_request")
