"""Hostile and malformed input, generated and hand-picked, against every endpoint: never a 500,
and a rejected request leaves every stored job and counter exactly as it was."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.helpers import sql

SQLISH = ["'; DROP TABLE werk_jobs; --", "1 OR 1=1", "$1", "\\x00", "%s%s%n", "{{7*7}}"]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(SQLISH)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

ENDPOINTS = {
    "/v1/jobs": {"jobtype": "t", "args": [], "queue": "default"},
    "/v1/jobs/batch": {"jobs": [{"jobtype": "t"}]},
    "/v1/fetch": {"queues": ["default"], "wid": "fuzz", "count": 1, "wait": 0},
    "/v1/ack": {"acks": [{"jid": "fuzz-active", "lease": "x"}]},
    "/v1/beat": {"wid": "fuzz"},
    "/v1/jobs/{jid}/ack": {"lease": "x"},
    "/v1/jobs/{jid}/fail": {"lease": "x", "errtype": "E"},
    "/v1/jobs/{jid}/extend": {"lease": "x", "progress": {}},
}


def mutated(base: dict) -> st.SearchStrategy[dict]:
    keys = [*base, "extra"]
    return st.dictionaries(st.sampled_from(keys), json_values, max_size=len(keys)).map(
        lambda changes: {**base, **changes}
    )


async def snapshot(database_url: str) -> tuple:
    jobs = await sql(
        database_url,
        "SELECT md5(coalesce(string_agg(j::text, '|' ORDER BY jid), '')) AS h FROM werk_jobs j",
    )
    counters = await sql(
        database_url,
        "SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c::text), '')) AS h "
        "FROM werk_counters c",
    )
    return jobs[0]["h"], counters[0]["h"]


@pytest.fixture
async def seeded(api):
    await api.http.post("/v1/jobs", json={"jobtype": "t", "jid": "fuzz-active"})
    await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "seed"})
    await api.http.post("/v1/jobs", json={"jobtype": "t", "jid": "fuzz-waiting", "queue": "q2"})
    return api


@pytest.mark.parametrize("path", list(ENDPOINTS))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
async def test_generated_bodies_never_500_and_rejections_change_nothing(
    seeded, database_url, path, data
):
    body = data.draw(mutated(ENDPOINTS[path]) | json_values, label="body")
    jid = data.draw(st.sampled_from(["fuzz-active", "fuzz-waiting", "nope", "../x", "%00"]))
    before = await snapshot(database_url)
    r = await seeded.http.post(path.format(jid=jid), json=body)
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["code"]
        assert await snapshot(database_url) == before


RAW_BODIES = [
    b"\xff\xfe\xfd",  # invalid UTF-8
    b'{"jobtype": "\xc3\x28"}',  # invalid UTF-8 inside a string
    b'{"jobtype": "t", "args": ["\\ud800"]}',  # lone surrogate
    b'{"jobtype": "t", "args": [1e999999]}',  # overflows to infinity
    b'{"jobtype": "t", "args": [-1e-999999, 123456789012345678901234567890]}',
    b"[" * 100_000 + b"]" * 100_000,  # deep nesting
    b'{"jobtype": "t", "args": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"jobtype": "t", "jobtype": 5}',  # duplicate keys
    b"null",
    b"",
    json.dumps({"jobtype": "t", "priority": -(2**64)}).encode(),
    json.dumps({"jobtype": "t", "reserve_for": 1.5}).encode(),
    json.dumps({"jobs": [{"jobtype": "t"}] * 5000}).encode(),  # over the batch limit
]


@pytest.mark.parametrize("path", list(ENDPOINTS))
async def test_hostile_raw_bodies(seeded, database_url, path):
    url = path.format(jid="fuzz-active")
    for content in RAW_BODIES:
        before = await snapshot(database_url)
        r = await seeded.http.post(
            url, content=content, headers={"content-type": "application/json"}
        )
        assert r.status_code < 500, (content[:40], r.status_code, r.text)
        if r.status_code >= 400:
            assert r.json()["code"]
            assert await snapshot(database_url) == before, content[:40]


async def test_oversized_body_is_refused(seeded, database_url):
    before = await snapshot(database_url)
    big = json.dumps({"jobtype": "t", "args": ["x" * (2 * 1024 * 1024)]}).encode()
    r = await seeded.http.post(
        "/v1/jobs", content=big, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert await snapshot(database_url) == before


async def test_hostile_path_parameters(seeded):
    for jid in ["'; DROP TABLE werk_jobs; --", "x" * 5000, "%00", "..%2F..%2Fetc", "\u202e"]:
        r = await seeded.http.get(f"/v1/jobs/{jid}")
        assert r.status_code in (404, 422), (jid, r.status_code)
    assert (await seeded.http.get("/v1/jobs/fuzz-waiting")).status_code == 200
