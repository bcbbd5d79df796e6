"""What the OpenAPI document states, the server does: the defects schemathesis found, one by one
(tests/e2e/contract/test_schemathesis.py runs it against a live server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import InProcess


async def _totals(api: InProcess) -> dict[str, Any]:
    info = (await api.http.get("/v1/info")).json()
    return {"totals": info["totals"], "states": info["states"]}


async def test_a_body_that_is_not_json_is_415_and_changes_nothing(api: InProcess) -> None:
    before = await _totals(api)
    for path in ("/v1/jobs", "/v1/jobs/batch", "/v1/fetch"):
        r = await api.http.post(
            path, content=b'{"jobtype": "x"}', headers={"content-type": "text/plain"}
        )
        assert r.status_code == 415, (path, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["code"] == "unsupported_media_type"
    assert await _totals(api) == before


async def test_a_json_body_with_a_bad_field_is_still_422(api: InProcess) -> None:
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "priority": "high"})
    assert r.status_code == 422 and r.json()["code"] == "invalid_request"


async def test_integers_may_be_sent_as_numbers_without_fraction(api: InProcess) -> None:
    """JSON Schema counts 31.0 as an integer; so do HTTP (both paths) and FWP."""
    one = {"jobtype": "x", "queue": "floats", "priority": 3.0, "retry": 2.0, "reserve_for": 60.0}
    r = await api.http.post("/v1/jobs", json=one)
    assert r.status_code == 201, r.text
    assert (r.json()["priority"], r.json()["retry"], r.json()["reserve_for"]) == (3, 2, 60)
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [one, {**one, "backtrace": 5.0}]})
    assert r.status_code == 201, r.text
    r = await api.http.post("/v1/fetch", json={"queues": ["floats"], "wid": "w1", "count": 2.0})
    assert r.status_code == 200 and len(r.json()["jobs"]) == 2, r.text


async def test_a_fraction_or_a_string_is_no_integer(api: InProcess) -> None:
    before = await _totals(api)
    for priority in (3.5, "3", True):
        r = await api.http.post("/v1/jobs", json={"jobtype": "x", "priority": priority})
        assert r.status_code == 422, (priority, r.text)
        assert r.json()["code"] == "invalid_request"
    assert await _totals(api) == before


async def test_a_number_is_no_time(api: InProcess) -> None:
    """`at` is declared an RFC 3339 string; a number was read as a Unix time and stored."""
    before = await _totals(api)
    for body in ({"jobtype": "x", "at": 0}, {"jobs": [{"jobtype": "x", "at": 1_900_000_000}]}):
        path = "/v1/jobs/batch" if "jobs" in body else "/v1/jobs"
        r = await api.http.post(path, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["code"] == "invalid_request"
    assert await _totals(api) == before


async def test_queue_names_in_paths_and_filters_follow_the_queue_pattern(api: InProcess) -> None:
    for method, path in (
        ("GET", "/v1/queues/a%20b"),
        ("POST", "/v1/queues/a%20b/pause"),
        ("GET", "/v1/jobs?queue=a%20b"),
        ("GET", "/v1/history?queue=a%20b"),
    ):
        r = await api.http.request(method, path)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["code"] == "invalid_request"
    assert (await api.http.get("/v1/queues")).json()["queues"] == []


async def test_allow_names_every_method_of_the_path(
    api: InProcess, make_api: Callable[..., Any]
) -> None:
    """/v1/jobs is served by two routes (GET lists, POST pushes); the dashboard's paths are not
    in the document."""
    for method, path, allow in (
        ("PUT", "/v1/jobs", "GET, HEAD, POST"),
        ("GET", "/v1/fetch", "POST"),
        ("HEAD", "/v1/fetch", "POST"),
        ("PUT", "/v1/jobs/j-1", "DELETE, GET, HEAD"),
        # The dashboard's paths, which the document leaves out.
        ("PUT", "/login", "GET, HEAD, POST"),
        ("DELETE", "/queues", "GET, HEAD"),
        ("GET", "/actions/jobs", "POST"),
        ("PUT", "/static/werk.css", "GET, HEAD"),
    ):
        r = await api.http.request(method, path)
        assert r.status_code == 405, path
        assert r.headers["content-type"] == "application/problem+json"
        assert r.headers["allow"] == allow, path
        if method == "HEAD":
            assert r.content == b"", path
    prefixed: InProcess = await make_api(root_path="/werk")
    for path in ("/werk/login", "/login"):
        r = await prefixed.http.put(path)
        assert (r.status_code, r.headers["allow"]) == (405, "GET, HEAD, POST"), path


async def test_head_is_answered_wherever_get_is_without_a_body(api: InProcess) -> None:
    """RFC 9110: a general-purpose server answers HEAD as GET, headers only."""
    for path in ("/livez", "/readyz", "/v1/info", "/v1/jobs", "/v1/jobs/no-such-job", "/queues"):
        got, head = await api.http.get(path), await api.http.head(path)
        assert head.status_code == got.status_code, path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.content == b"" and got.content, path


async def test_every_error_of_every_operation_is_a_declared_problem(api: InProcess) -> None:
    app: Any = api.http._transport.app  # type: ignore[attr-defined]
    document = app.openapi()
    problem = {"schema": {"$ref": "#/components/schemas/Problem"}}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            errors = {s: r for s, r in responses.items() if s[0] in "45"}
            assert {"400", "413", "500"} <= set(errors), (method, path)
            if operation.get("security"):
                assert {"401", "403", "429"} <= set(errors), (method, path)
            if "requestBody" in operation:
                assert {"415", "422"} <= set(errors), (method, path)
            if path != "/livez":
                assert "503" in errors, (method, path)
            for status, response in errors.items():
                # A Problem, or one with more members (not_unique names the holder).
                expected = problem
                if (method, path, status) == ("post", "/v1/jobs", "409"):
                    expected = {"schema": {"$ref": "#/components/schemas/NotUniqueProblem"}}
                assert response["content"] == {"application/problem+json": expected}, status
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    extended = schemas["NotUniqueProblem"]
    assert set(schemas["Problem"]["properties"]) < set(extended["properties"])
