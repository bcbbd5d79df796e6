"""What generated clients rely on: null on an optional request field means "not given" (in
every request body), one success status and one answer shape per operation, the batch limit the
document states, and no read path showing a job's lease."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import orjson
import pytest

from tests.conftest import InProcess
from tests.integration.admin.test_auth import CONFIG, bearer
from werk.api import admin_schemas, batch_schemas, schemas
from werk.app import create_app
from werk.config import Settings
from werk.domain.bodies import Body, CallbackJob, DependencyBody, JobPush, UniqueBody
from werk.domain.json_values import NO_NUL

NULL_JOB = {
    "jid": None, "args": None, "queue": None, "priority": None, "reserve_for": None, "at": None,
    "retry": None, "backtrace": None, "custom": None,
}  # fmt: skip


async def _send(api: InProcess, path: str, body: bytes, how: str, **headers: str) -> Any:
    """POST a JSON body sized (Content-Length) or streamed (none)."""

    async def streamed() -> Any:
        yield body

    return await api.http.post(
        path,
        content=body if how == "sized" else streamed(),
        headers={"content-type": "application/json", **headers},
    )


async def _totals(api: InProcess) -> dict[str, int]:
    totals: dict[str, int] = (await api.http.get("/v1/info")).json()["totals"]
    return totals


@pytest.mark.parametrize("how", ["sized", "streamed"])
async def test_null_on_an_optional_field_means_not_given(api: InProcess, how: str) -> None:
    dumps = orjson.dumps
    r = await _send(api, "/v1/jobs", dumps({"jobtype": "nulls", **NULL_JOB}), how)
    assert r.status_code == 201, r.text
    job = r.json()
    assert (job["args"], job["queue"], job["priority"], job["reserve_for"]) == (
        [],
        "default",
        0,
        1800,
    )
    assert (job["retry"], job["backtrace"], job["custom"], job["at"]) == (25, 0, {}, None)
    assert len(job["jid"]) >= 8 and job["created"] is True
    batch = {"jobs": [{"jobtype": "nulls", **NULL_JOB}, {"jobtype": "nulls", "queue": None}]}
    r = await _send(api, "/v1/jobs/batch", dumps(batch), how)
    assert r.status_code == 201, r.text
    assert [j["queue"] for j in r.json()["jobs"]] == ["default"] * 2

    r = await _send(
        api,
        "/v1/fetch",
        dumps({"queues": ["default"], "wid": "w", "count": None, "wait": None}),
        how,
    )
    assert r.status_code == 200, r.text
    (first,) = r.json()["jobs"]  # count null: 1
    r = await _send(
        api,
        f"/v1/jobs/{first['jid']}/extend",
        dumps({"lease": first["lease"], "progress": {"step": 1}}),
        how,
    )
    assert r.status_code == 200, r.text
    r = await _send(
        api,
        f"/v1/jobs/{first['jid']}/extend",
        dumps({"lease": first["lease"], "reserve_for": None, "progress": None}),
        how,
    )
    assert r.status_code == 200, r.text
    stored = (await api.http.get(f"/v1/jobs/{first['jid']}")).json()
    assert stored["progress"] == {"step": 1}  # null: the checkpoint stays
    report = {"lease": first["lease"], "errtype": None, "message": None, "backtrace": None,
              "retry_in": None, "retry": None}  # fmt: skip
    r = await _send(api, f"/v1/jobs/{first['jid']}/fail", dumps(report), how)
    assert r.status_code == 200 and r.json()["state"] == "scheduled", r.text
    failure = (await api.http.get(f"/v1/jobs/{first['jid']}")).json()["failure"]
    assert (failure["errtype"], failure["message"], failure["backtrace"]) == ("unknown", "", [])

    beat = {"wid": "w", "hostname": None, "pid": None, "labels": None, "current_state": None,
            "rss_kb": None}  # fmt: skip
    r = await _send(api, "/v1/beat", dumps(beat), how)
    assert r.status_code == 200 and r.json() == {"state": "running"}, r.text


async def test_null_on_a_required_field_is_refused_and_stores_nothing(api: InProcess) -> None:
    for body in ({"jobtype": None}, {"jobs": [{"jobtype": None}]}):
        path = "/v1/jobs/batch" if "jobs" in body else "/v1/jobs"
        r = await api.http.post(path, json=body)
        assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": None})
    assert (r.status_code, r.json()["code"]) == (422, "invalid_request")
    assert (await _totals(api))["enqueued"] == 0


async def test_null_in_an_admin_body_means_not_given(api: InProcess) -> None:
    await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "a"}] * 3})
    body = {"state": None, "queue": None, "jobtype": None, "q": None, "failed": None,
            "limit": None}  # fmt: skip
    r = await api.http.post("/v1/jobs/kill", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {"action": "kill", "changed": 3, "more": False}  # limit null: 1,000


def _request_bodies(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    schemas_ = document["components"]["schemas"]
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            content = op.get("requestBody", {}).get("content", {}).get("application/json")
            if content:
                name = content["schema"]["$ref"].rsplit("/", 1)[1]
                yield f"{method.upper()} {path}", schemas_[name]
                for prop in schemas_[name]["properties"].values():
                    ref = prop.get("items", {}).get("$ref")
                    if ref:  # the items of a batch
                        yield f"{method.upper()} {path} items", schemas_[ref.rsplit("/", 1)[1]]


def test_every_optional_request_field_is_declared_nullable(api_document: dict[str, Any]) -> None:
    seen = 0
    for where, schema in _request_bodies(api_document):
        required = set(schema.get("required", ()))
        for name, prop in schema["properties"].items():
            seen += 1
            shape = {k: v for k, v in prop.items() if k not in ("title", "description", "default")}
            if name in required:
                assert {"type": "null"} not in shape.get("anyOf", []), (where, name)
            elif shape:  # (an empty shape is any JSON value, null included)
                assert {"type": "null"} in shape.get("anyOf", []), (where, name, prop)
    assert seen > 30


def test_each_job_operation_has_one_success_status_and_shape(
    api_document: dict[str, Any],
) -> None:
    paths = api_document["paths"]
    for path in ("/v1/jobs", "/v1/jobs/batch", "/v1/fetch", "/v1/jobs/{jid}"):
        for op in paths[path].values():
            ok = {code: r for code, r in op["responses"].items() if code.startswith("2")}
            # One shape: a unique push met by a holder answers 200 with the same schema.
            assert len(ok) == 1 or (path == "/v1/jobs" and set(ok) == {"200", "201"}), (path, ok)
            shapes = [r.get("content", {"application/json": {"schema": {}}}) for r in ok.values()]
            assert all(shape == shapes[0] for shape in shapes), path  # (204: no content)
            assert "anyOf" not in shapes[0]["application/json"]["schema"], path
    prefer = next(p for p in paths["/v1/jobs/batch"]["post"]["parameters"] if p["name"] == "prefer")
    # Any preference is taken (RFC 7240: those it does not know, the server ignores); the
    # examples name those that change the answer.
    assert prefer["schema"] == {
        "type": "string",
        "examples": ["return=minimal", "return=representation"],
        "title": "Prefer",
    }
    s = api_document["components"]["schemas"]
    assert set(s["JobBatchPushed"]["required"]) == {"jids", "created", "existed"}
    assert "lease" not in s["Job"]["properties"] and "lease" in s["FetchedJob"]["required"]
    # All always sent, but the dependencies and dependents of a job that has them (on a fetch
    # and a read of one job), and the mark of dependencies left out.
    optional = {"dependencies", "dependencies_omitted", "dependents", "batch"}
    assert set(s["Job"]["required"]) == set(s["Job"]["properties"]) - optional
    assert s["JobBatchPush"]["properties"]["jobs"]["maxItems"] == schemas.DEFAULT_MAX_BATCH == 1000


@pytest.fixture
def api_document() -> dict[str, Any]:
    document: dict[str, Any] = create_app(Settings(database_url="postgresql://unused/x")).openapi()
    return document


async def test_both_batch_answers_have_one_shape(api: InProcess) -> None:
    await api.http.post("/v1/jobs", json={"jobtype": "x", "jid": "shape-existing"})
    jobs = [{"jobtype": "x", "jid": "shape-new-1"}, {"jobtype": "x", "jid": "shape-existing"}]
    full = (await api.http.post("/v1/jobs/batch", json={"jobs": jobs})).json()
    assert list(full) == ["jids", "created", "existed", "jobs"]
    assert (full["jids"], full["created"], full["existed"]) == (
        ["shape-new-1", "shape-existing"],
        1,
        ["shape-existing"],
    )
    assert [j["jid"] for j in full["jobs"]] == full["jids"]
    jobs = [{"jobtype": "x", "jid": "shape-new-2"}, {"jobtype": "x", "jid": "shape-existing"}]
    r = await api.http.post(
        "/v1/jobs/batch", json={"jobs": jobs}, headers={"Prefer": "return=minimal"}
    )
    assert r.json() == {"jids": ["shape-new-2", "shape-existing"], "created": 1,
                        "existed": ["shape-existing"]}  # fmt: skip
    # A preference the server does not know is ignored (RFC 7240): the full answer.
    r = await api.http.post(
        "/v1/jobs/batch", json={"jobs": jobs}, headers={"Prefer": "respond-async"}
    )
    assert r.status_code == 201 and "jobs" in r.json()


@pytest.mark.parametrize("how", ["sized", "streamed"])
async def test_the_batch_limit_named_is_the_configured_one(
    make_api: Callable[..., Any], how: str
) -> None:
    api: InProcess = await make_api(max_batch=3)
    r = await _send(api, "/v1/jobs/batch", orjson.dumps({"jobs": [{"jobtype": "a"}] * 4}), how)
    assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    assert "at most 3 jobs" in r.json()["detail"]
    assert r.json()["errors"] == [{"loc": "jobs", "message": "at most 3 items"}]
    acks = {"acks": [{"jid": f"job-{i:08}", "lease": "l"} for i in range(4)]}
    r = await _send(api, "/v1/ack", orjson.dumps(acks), how)
    assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    assert "at most 3 acks" in r.json()["detail"]
    assert (await _totals(api))["enqueued"] == 0
    # Above the default of the document, within the configured limit.
    api = await make_api(max_batch=1500)
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "a"}] * 1200})
    assert r.status_code == 201 and r.json()["created"] == 1200


async def test_no_read_path_shows_a_lease(make_api: Callable[..., Any]) -> None:
    """A lease is the holder's secret: a push token (or another worker) reading the job must not
    learn it, or it could settle a job it never held."""
    api: InProcess = await make_api(tokens=CONFIG, auth_failures_per_minute=1000)
    for jid in ("secret-lease-1", "secret-lease-2"):
        body = {"jobtype": "a", "jid": jid}
        r = await api.http.post("/v1/jobs", json=body, headers=bearer("push"))
        assert r.status_code == 201 and "lease" not in r.json()
    r = await api.http.post(
        "/v1/fetch",
        json={"queues": ["default"], "wid": "holder", "count": 2},
        headers=bearer("work"),
    )
    held = r.json()["jobs"]
    assert all(isinstance(j["lease"], str) and j["lease"] for j in held)
    jid = held[0]["jid"]
    reads = [
        (await api.http.get(f"/v1/jobs/{jid}", headers=bearer(scope))).json()
        for scope in ("push", "work", "admin")
    ]
    listed = (await api.http.get("/v1/jobs?state=active", headers=bearer("admin"))).json()
    killed = await api.http.post(f"/v1/jobs/{held[1]['jid']}/kill", headers=bearer("admin"))
    assert killed.status_code == 200, killed.text
    for job in [*reads, *listed["jobs"], killed.json()]:
        assert job["state"] in ("active", "dead") and "lease" not in job, job
    assert len(listed["jobs"]) == 2
    # The holder's lease still settles its job; nothing else does.
    r = await api.http.post(
        f"/v1/jobs/{jid}/ack", json={"lease": held[0]["lease"]}, headers=bearer("work")
    )
    assert r.status_code == 204


async def test_the_dashboard_never_shows_a_lease(api: InProcess) -> None:
    await api.http.post("/v1/jobs", json={"jobtype": "a", "jid": "dash-lease"})
    r = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w"})
    (job,) = r.json()["jobs"]
    page = (await api.http.get("/jobs/dash-lease")).text
    assert "dash-lease" in page and job["lease"] not in page


# The required fields of each msgspec body (werk.domain.bodies.Body).
_REQUIRED = {
    schemas.Fetch: {"queues": ["q"], "wid": "w"},
    schemas.Ack: {"lease": "l"},
    schemas.AckItem: {"jid": "abcdefgh", "lease": "l"},
    schemas.AckBatch: {"acks": [{"jid": "abcdefgh", "lease": "l"}]},
    schemas.FailReport: {"lease": "l"},
    schemas.Extend: {"lease": "l"},
    schemas.Beat: {"wid": "w"},
    JobPush: {"jobtype": "t"},
    CallbackJob: {"jobtype": "t"},
    UniqueBody: {},
    DependencyBody: {"job": "abcdefgh"},
    schemas.JobBatchPush: {"jobs": [{"jobtype": "t"}]},
    batch_schemas.BatchNew: {},
    admin_schemas.BulkAction: {},
}


def test_every_struct_body_reads_null_as_not_given() -> None:
    """Each optional field of a msgspec body, sent as null, leaves the body as if it were absent
    (its __post_init__ must put back each default that is not null)."""
    bodies: list[type[Body]] = [Body]
    for cls in bodies:
        bodies.extend(cls.__subclasses__())
    assert set(bodies) - {Body} == set(_REQUIRED)
    for cls, required in _REQUIRED.items():
        optional = [f.encode_name for f in msgspec.structs.fields(cls) if f.required is False]
        assert not set(optional) & set(required), cls
        absent = msgspec.json.decode(orjson.dumps(required), type=cls)
        nulls = msgspec.json.decode(orjson.dumps({**required, **dict.fromkeys(optional)}), type=cls)
        assert nulls == absent, cls


def test_every_struct_text_the_schema_bars_nul_from_refuses_it() -> None:
    """A text field whose schema states the NUL pattern refuses NUL (its body's texts)."""
    checked = 0
    for cls, required in _REQUIRED.items():
        _, defs = msgspec.json.schema_components([cls])
        for name, prop in defs[cls.__name__]["properties"].items():
            for shape in prop.get("anyOf", [prop]):
                nul: Any = None
                if shape.get("pattern") == NO_NUL:
                    nul = "abcdefgh\x00"
                elif shape.get("items", {}).get("pattern") == NO_NUL:
                    nul = ["abcdefgh\x00"]
                if nul is None:
                    continue
                body = orjson.dumps({**required, name: nul})
                with pytest.raises(msgspec.ValidationError, match="NUL"):
                    msgspec.json.decode(body, type=cls)
                checked += 1
    assert checked >= 15
