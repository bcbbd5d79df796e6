"""Pushing jobs: defaults, idempotency, scheduling, batches, and validation that stores nothing."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from tests.support.helpers import as_pushed, count_jobs
from tests.support.helpers import sql as fetch_rows
from werk.api.jobs_routes import wants_minimal
from werk.db import queries
from werk.db.pool import connect
from werk.db.sql import sql
from werk.domain import job as job_model
from werk.domain.bodies import MAX_ERRORS, JobPush
from werk.domain.jids import new_jid, new_jids


async def test_push_returns_the_stored_job_with_defaults(api):
    r = await api.http.post("/v1/jobs", json={"jobtype": "email", "args": [1, "a", {"b": None}]})
    assert r.status_code == 201
    job = r.json()
    assert len(job["jid"]) >= 8
    assert job["jobtype"] == "email"
    assert job["args"] == [1, "a", {"b": None}]
    assert job["queue"] == "default"
    assert (job["priority"], job["reserve_for"], job["retry"]) == (0, 1800, 25)
    assert job["state"] == "available"
    assert job["attempt"] == 0 and job["failure"] is None and "lease" not in job
    assert job["created_at"] == job["enqueued_at"] and job.pop("created") is True
    r = await api.http.get(f"/v1/jobs/{job['jid']}")
    assert as_pushed(r.json()) == job
    assert r.json()["keep_result_for"] == 0 and r.json()["unique"] is None


async def test_same_jid_twice_stores_one_job_and_returns_the_stored_one(api, database_url):
    body = {"jid": "order-1234", "jobtype": "charge", "args": [10]}
    first = await api.http.post("/v1/jobs", json=body)
    second = await api.http.post("/v1/jobs", json={**body, "args": [99]})
    # One success status (generated clients keep one): `created` tells the two apart.
    assert (first.status_code, second.status_code) == (201, 201)
    assert (first.json().pop("created"), second.json().pop("created")) == (True, False)
    assert {**second.json(), "created": True} == first.json()
    assert await count_jobs(database_url) == 1


async def test_future_at_is_scheduled_and_becomes_available_when_due(api):
    at = api.clock.now() + timedelta(minutes=5)
    r = await api.http.post("/v1/jobs", json={"jobtype": "later", "at": at.isoformat()})
    job = r.json()
    assert job["state"] == "scheduled" and job["enqueued_at"] is None
    fetch = {"queues": ["default"], "wid": "w1", "count": 10}
    assert (await api.http.post("/v1/fetch", json=fetch)).json()["jobs"] == []
    api.clock.advance(299)
    await api.maintain()
    assert (await api.http.post("/v1/fetch", json=fetch)).json()["jobs"] == []
    api.clock.advance(2)
    assert (await api.maintain())["promoted"] == 1
    jobs = (await api.http.post("/v1/fetch", json=fetch)).json()["jobs"]
    assert [j["jid"] for j in jobs] == [job["jid"]]


async def test_past_at_is_available_at_once(api):
    at = datetime(2001, 1, 1, tzinfo=UTC).isoformat()
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "at": at})
    assert r.json()["state"] == "available"


async def test_batch_push_is_one_transaction(api, database_url):
    jobs = [{"jobtype": "b", "args": [i], "jid": f"batch-job-{i}"} for i in range(3)]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201
    body = r.json()
    assert body["created"] == 3
    assert [j["jid"] for j in body["jobs"]] == ["batch-job-0", "batch-job-1", "batch-job-2"]
    # Re-pushing part of it creates only the new one.
    again = [jobs[0], {"jobtype": "b", "jid": "batch-job-9"}]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": again})
    assert r.json()["created"] == 1
    assert await count_jobs(database_url) == 4


async def test_a_batch_with_an_existing_jid_stores_the_others_once_and_counts_them(
    api, database_url
):
    """A push first takes its jids to be new; one that exists fails that attempt, which must
    leave nothing behind: no job, no count, no sequence of half-written rows."""
    await api.http.post("/v1/jobs", json={"jobtype": "x", "jid": "exists-already", "args": [1]})
    jobs = [{"jobtype": "x", "jid": f"fresh-job-{i}"} for i in range(3)]
    jobs.insert(1, {"jobtype": "x", "jid": "exists-already", "args": [2]})
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201, r.text
    assert r.json()["created"] == 3
    assert [j["jid"] for j in r.json()["jobs"]] == [j["jid"] for j in jobs]
    assert r.json()["jobs"][1]["args"] == [1]
    assert await count_jobs(database_url) == 4
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"]["enqueued"] == 4


async def test_concurrent_batches_sharing_jids_store_each_job_once(api, database_url):
    """Each batch waits for the other's uncommitted jids, then skips the ones that made it."""
    batches = [
        [{"jobtype": "x", "jid": f"shared-job-{i}"} for i in range(start, start + 60)]
        for start in (0, 30, 15, 45)
    ]
    answers = await asyncio.gather(
        *(api.http.post("/v1/jobs/batch", json={"jobs": b}) for b in batches)
    )
    assert [a.status_code for a in answers] == [201] * 4
    assert sum(a.json()["created"] for a in answers) == 105
    assert await count_jobs(database_url) == 105
    info = (await api.http.get("/v1/info")).json()
    assert info["totals"]["enqueued"] == 105


def test_generated_jids_grow_with_time_and_are_distinct_within_a_batch():
    batch = new_jids(1000)
    time.sleep(0.002)
    later = new_jid()
    assert len(set(batch)) == 1000
    assert batch == sorted(batch)
    assert later > batch[-1]


async def test_batch_generates_a_distinct_jid_for_each_job_without_one(api, database_url):
    jobs = [
        {"jobtype": "b"},
        {"jobtype": "b", "jid": "given-jid-1"},
        {"jobtype": "b", "jid": "given-jid-2"},
        {"jobtype": "b"},
    ]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201, r.text
    jids = [j["jid"] for j in r.json()["jobs"]]
    assert jids[1:3] == ["given-jid-1", "given-jid-2"]
    assert len(set(jids)) == 4
    assert all(len(jid) == 28 and set(jid) <= set("0123456789abcdef") for jid in jids[::3])
    assert await count_jobs(database_url) == 4


async def test_batch_with_one_bad_item_stores_nothing_and_names_the_item(api, database_url):
    jobs = [{"jobtype": "ok"}, {"jobtype": "bad", "queue": "no spaces"}, {"jobtype": "ok"}]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 422
    problem = r.json()
    assert r.headers["content-type"] == "application/problem+json"
    assert problem["code"] == "invalid_request"
    assert [e["loc"] for e in problem["errors"]] == ["jobs.1.queue"]
    assert await count_jobs(database_url) == 0


async def test_batch_with_duplicate_jids_is_rejected(api, database_url):
    jobs = [{"jobtype": "a", "jid": "same-jid-1"}, {"jobtype": "b", "jid": "same-jid-1"}]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == "jobs.1.jid"
    assert await count_jobs(database_url) == 0


async def test_batch_size_limit(make_api, database_url):
    api = await make_api(max_batch=5)
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "x"}] * 6})
    assert r.status_code == 422
    assert "at most 5" in r.json()["detail"]
    assert await count_jobs(database_url) == 0


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({}, "jobtype"),
        ({"jobtype": ""}, "jobtype"),
        ({"jobtype": 5}, "jobtype"),
        ({"jobtype": "x", "queue": "a/b"}, "queue"),
        ({"jobtype": "x", "queue": "q" * 101}, "queue"),
        ({"jobtype": "x", "jid": "short"}, "jid"),
        ({"jobtype": "x", "args": {"a": 1}}, "args"),
        ({"jobtype": "x", "args": "1,2"}, "args"),
        ({"jobtype": "x", "reserve_for": 59}, "reserve_for"),
        ({"jobtype": "x", "reserve_for": 86401}, "reserve_for"),
        ({"jobtype": "x", "retry": -2}, "retry"),
        ({"jobtype": "x", "priority": 10**6}, "priority"),
        ({"jobtype": "x", "at": "2030-01-01T00:00:00"}, "at"),
        ({"jobtype": "x", "at": "tomorrow"}, "at"),
        ({"jobtype": "x", "custom": [1]}, "custom"),
        ({"jobtype": "x", "args": ["a\u0000b"]}, "args"),
        ({"jobtype": "x", "args": [2**70]}, "args"),
        ({"jobtype": "x", "queu": "typo"}, "queu"),
    ],
)
async def test_invalid_push_names_the_field_and_stores_nothing(api, database_url, body, loc):
    r = await api.http.post("/v1/jobs", json=body)
    assert r.status_code == 422, r.text
    problem = r.json()
    assert problem["code"] == "invalid_request"
    assert loc in [e["loc"] for e in problem["errors"]]
    assert loc in problem["detail"]
    assert await count_jobs(database_url) == 0


async def test_deeply_nested_args_are_rejected(api, database_url):
    deep: list = []
    for _ in range(100):
        deep = [deep]
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "args": deep})
    assert r.status_code == 422
    assert await count_jobs(database_url) == 0


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("args", [1, {"a": [2, 2**63]}], "64 bits"),
        ("args", [-(2**63) - 1], "64 bits"),
        # A whole double is stored as the integer it equals.
        ("args", [1e19], "64-bit integers"),
        ("args", [-1e19], "64-bit integers"),
        ("custom", {"a": [1.5e308]}, "64-bit integers"),
        ("args", [{"k": ["ok", "nul\x00"]}], "NUL"),
        ("custom", {"a": {"nul\x00key": 1}}, "NUL"),
        ("args", [[1, 2], _nested(64)], "nested deeper than 64"),
        ("custom", {"a": _nested(64)}, "nested deeper than 64"),
        # 219 times 300 zeros: over the 65,536 a value may add.
        ("args", [1, [1e-300] * 219], "written out in full"),
        ("custom", {"a": {"b": [-5e-300] * 219}}, "written out in full"),
    ],
)
async def test_json_postgresql_cannot_store_is_rejected_at_any_depth(
    api, database_url, field, value, message
):
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "x", field: value}]})
    assert r.status_code == 422, r.text
    assert message in r.json()["detail"]
    assert await count_jobs(database_url) == 0


@pytest.mark.parametrize("args", [[1e20], [{"n": -1e19}], [9.3e18], [1e-300] * 219])
async def test_a_double_beyond_64_bits_is_refused_in_a_unique_push_and_a_result(
    api, database_url, args
):
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "args": args, "unique": {}})
    assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    assert await count_jobs(database_url) == 0
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "keep_result_for": 60})
    (job,) = (await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w"})).json()[
        "jobs"
    ]
    for url, body in (
        (f"/v1/jobs/{job['jid']}/extend", {"lease": job["lease"], "progress": args}),
        (f"/v1/jobs/{job['jid']}/ack", {"lease": job["lease"], "result": args}),
    ):
        r = await api.http.post(url, json=body)
        assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "active"


async def test_json_at_the_limits_is_stored_as_sent(api):
    args = [2**63 - 1, -(2**63), 1.5, -9.2e18, True, False, None, "é\u2603", {"k": _nested(62)}]
    custom = {"deep": _nested(63), "": []}
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "args": args, "custom": custom})
    assert r.status_code == 201, r.text
    stored = (await api.http.get(f"/v1/jobs/{r.json()['jid']}")).json()
    assert (stored["args"], stored["custom"]) == (args, custom)


async def test_small_numbers_are_stored_within_their_bound(api, database_url):
    # 218 times 300 zeros, within the bound: stored, and read back as the numbers sent.
    args = [1e-300] * 218 + [1.5e-5, 0.25]
    r = await api.http.post("/v1/jobs", json={"jobtype": "x", "args": args})
    assert r.status_code == 201, r.text
    assert (await api.http.get(f"/v1/jobs/{r.json()['jid']}")).json()["args"] == args
    written = await fetch_rows(database_url, "SELECT length(args::text) FROM werk_jobs")
    assert 218 * 300 < written[0][0] < 218 * 310


async def test_nan_is_rejected(api, database_url):
    content = b'{"jobtype": "x", "args": [NaN]}'
    r = await api.http.post(
        "/v1/jobs", content=content, headers={"content-type": "application/json"}
    )
    assert r.status_code in (400, 422)
    assert await count_jobs(database_url) == 0


async def test_malformed_json_is_a_400_problem(api):
    r = await api.http.post(
        "/v1/jobs", content=b'{"jobtype": ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["code"] == "invalid_json"


async def test_body_size_limit(make_api, database_url):
    api = await make_api(max_body_bytes=2048)
    big = {"jobtype": "x", "args": ["y" * 4000]}
    r = await api.http.post("/v1/jobs", json=big)
    assert r.status_code == 413
    assert r.json()["code"] == "payload_too_large"

    async def chunks():  # no Content-Length: the limit is enforced while reading
        yield b'{"jobtype": "x", "args": ["'
        for _ in range(10):
            yield b"z" * 500
        yield b'"]}'

    r = await api.http.post(
        "/v1/jobs", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert await count_jobs(database_url) == 0


async def test_unknown_route_and_method_are_problems(api):
    r = await api.http.get("/v1/nothing-here")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = await api.http.delete("/v1/fetch")
    assert r.status_code == 405 and r.json()["code"] == "method_not_allowed"


async def test_get_unknown_job_is_404(api):
    r = await api.http.get("/v1/jobs/does-not-exist")
    assert r.status_code == 404
    assert r.json()["code"] == "job_not_found"


async def test_a_lone_job_and_a_batch_store_the_same_job(api):
    """One job is written by a statement of plain values, several by one of arrays
    (job_push.sql's parts one and many): both must store a job the same way."""
    spec = {
        "jobtype": "same",
        "args": [1, {"a": [2]}],
        "queue": "q-same",
        "priority": 7,
        "reserve_for": 90,
        "retry": 3,
        "backtrace": 5,
        "custom": {"k": "v"},
        "at": (api.clock.now() + timedelta(minutes=1)).isoformat(),
    }
    alone = (await api.http.post("/v1/jobs", json={**spec, "jid": "same-one"})).json()
    assert alone.pop("created") is True
    r = await api.http.post(
        "/v1/jobs/batch",
        json={"jobs": [{**spec, "jid": "same-many-1"}, {**spec, "jid": "same-many-2"}]},
    )
    assert r.status_code == 201, r.text
    for job in r.json()["jobs"]:
        assert {**job, "jid": "same-one"} == alone
    assert alone["state"] == "scheduled" and alone["custom"] == {"k": "v"}


async def test_a_batch_whose_jobs_differ_in_every_field_stores_each_as_given(api):
    """A column whose jobs all agree travels as one value (job_push.sql's part many fills it
    in); one where they differ travels per job. Every field differs here, `at` is set for some
    only."""
    later = api.clock.now() + timedelta(minutes=1)
    specs = [
        {"jobtype": f"t{i}", "args": [i], "queue": f"q-{i}", "priority": i, "reserve_for": 60 + i,
         "retry": i, "backtrace": i, "custom": {"i": i}, "jid": f"differ-many-{i}",
         **({"at": (later + timedelta(seconds=i)).isoformat()} if i else {})}
        for i in range(3)
    ]  # fmt: skip
    r = await api.http.post("/v1/jobs/batch", json={"jobs": specs})
    assert r.status_code == 201, r.text
    for spec, job in zip(specs, r.json()["jobs"], strict=True):
        alone = await api.http.post("/v1/jobs", json={**spec, "jid": spec["jid"] + "-alone"})
        assert {**job, "jid": spec["jid"] + "-alone", "created": True} == alone.json()
    assert [j["state"] for j in r.json()["jobs"]] == ["available", "scheduled", "scheduled"]


async def test_a_pushed_job_is_answered_as_it_is_stored(api):
    """A job the push inserts is answered from the job as sent (not read back): the answer must
    be what a read of the job returns, whatever the fields, alone and in batches."""
    now = api.clock.now().astimezone(timezone(timedelta(hours=5, minutes=30)))
    specs = [
        {"jobtype": "plain"},
        {"jobtype": "full", "args": [1.5, -(2**63), "é", {"zz": [None], "a": {"y": 1, "b": 2}}],
         "queue": "q-as-stored", "priority": -3, "reserve_for": 61, "retry": -1,
         "backtrace": 2, "custom": {"long-key": 1, "k": {"b": True, "a": False}}},
        {"jobtype": "later", "at": (now + timedelta(hours=1)).isoformat()},
        {"jobtype": "due", "at": (now - timedelta(hours=1)).isoformat()},
    ]  # fmt: skip
    answers = [(await api.http.post("/v1/jobs", json=spec)).json() for spec in specs]
    assert [a.pop("created") for a in answers] == [True] * 4
    r = await api.http.post("/v1/jobs/batch", json={"jobs": specs})
    assert r.status_code == 201, r.text
    answers += r.json()["jobs"]
    for job in answers:
        assert as_pushed((await api.http.get(f"/v1/jobs/{job['jid']}")).json()) == job
    assert [j["state"] for j in answers] == ["available", "available", "scheduled", "available"] * 2


def test_the_defaults_the_schema_states_are_the_ones_applied():
    """The schema states each optional field's default; a job decoded without the field, and
    one the server builds itself, take the struct's: the two must agree."""
    _, components = msgspec.json.schema_components([JobPush])
    properties = components["JobPush"]["properties"]
    stated = {name: p["default"] for name, p in properties.items() if "default" in p}
    assert set(stated) == set(properties) - {"jobtype"}
    spec = JobPush(jobtype="x")
    assert {name: getattr(spec, name) for name in stated} == stated
    assert msgspec.json.decode(b'{"jobtype": "x"}', type=JobPush) == spec


async def test_every_variant_of_the_push_statement_is_valid_sql(database_url):
    conn = await connect(database_url)
    try:
        for jobs, conflict, answer, taken in itertools.product(
            ("one", "many"), ("new", "dedupe"), ("rows", "decided", "jids"), ("checked", "minted")
        ):
            await conn.prepare(
                queries.push_sql(
                    f"job_push.{jobs}",
                    f"job_push.{conflict}",
                    f"job_push.{answer}",
                    f"job_push.{taken}",
                )
            )
        # Unique keys: one variant.
        await conn.prepare(
            sql("job_push", jobs="job_push.keyed", release="job_push.release",
                conflict="job_push.holder", tally="job_push.created", answer="job_push.met",
                kept="job_push.any", taken="job_push.checked")
        )  # fmt: skip
    finally:
        await conn.close()


def test_a_job_spec_takes_the_defaults_of_the_job_model():
    """JobPush applies the job model's defaults, not copies of their values."""
    spec = JobPush(jobtype="x")
    assert (spec.reserve_for, spec.retry) == (
        job_model.RESERVE_FOR_DEFAULT,
        job_model.RETRY_DEFAULT,
    )


def test_a_statement_is_composed_only_from_parts_that_fit():
    with pytest.raises(ValueError, match="holds no"):
        sql("job_fetch", jobs="job_push.one")
    # A marker standing several times is filled everywhere (the job pages' order and bound),
    # also where a part filled before it brought it (matched holds the after marker).
    both = sql("admin_job_list", pairs="queue_state_pairs", search="admin_job_search",
               matched="admin_job_list.matched", order="admin_job_list.desc",
               after="admin_job_list.older")  # fmt: skip
    assert both.count("jid DESC") == 3 and both.count("coalesce($6") == 3 and "/*" not in both
    with pytest.raises(ValueError, match="no part"):
        sql("job_push", jobs="job_push.few", conflict="job_push.new", answer="job_push.rows")
    with pytest.raises(ValueError, match="no part fills"):
        sql("job_push", jobs="job_push.one", conflict="job_push.new")


async def test_prefer_return_minimal_answers_a_batch_with_its_jids(api):
    await api.http.post("/v1/jobs", json={"jobtype": "x", "jid": "min-existing"})
    jobs = [
        {"jobtype": "x", "jid": "min-0001", "args": [1], "priority": 3},
        {"jobtype": "x"},  # jid generated
        {"jobtype": "x", "jid": "min-existing", "args": ["ignored"]},
        {
            "jobtype": "x",
            "jid": "min-later",
            "at": (api.clock.now() + timedelta(hours=1)).isoformat(),
        },
    ]
    r = await api.http.post(
        "/v1/jobs/batch", json={"jobs": jobs}, headers={"Prefer": "return=minimal"}
    )
    assert r.status_code == 201, r.text
    assert r.headers["preference-applied"] == "return=minimal"
    answer = r.json()
    assert set(answer) == {"jids", "created", "existed"}
    first, generated, existing, later = answer["jids"]
    assert (first, existing, later) == ("min-0001", "min-existing", "min-later")
    assert len(generated) >= 8 and generated not in (first, existing, later)
    assert (answer["created"], answer["existed"]) == (3, ["min-existing"])
    stored = {jid: (await api.http.get(f"/v1/jobs/{jid}")).json() for jid in answer["jids"]}
    assert (stored["min-0001"]["args"], stored["min-0001"]["priority"]) == ([1], 3)
    assert stored[generated]["state"] == "available"
    assert stored["min-existing"]["args"] == []
    assert stored["min-later"]["state"] == "scheduled"


async def test_a_fetch_waiting_when_a_minimal_batch_lands_is_woken_and_gets_a_job(api):
    fetch = asyncio.create_task(
        api.http.post("/v1/fetch", json={"queues": ["q-min"], "wid": "w1", "wait": 10})
    )
    for _ in range(200):  # until the fetch is parked
        await asyncio.sleep(0.01)
        if api.services.hub._waiters.get("q-min"):
            break
    r = await api.http.post(
        "/v1/jobs/batch",
        json={"jobs": [{"jobtype": "x", "queue": "q-min", "jid": "min-woken"}]},
        headers={"Prefer": "return=minimal"},
    )
    assert r.json()["jids"] == ["min-woken"]
    (job,) = (await fetch).json()["jobs"]
    assert (job["jid"], job["state"], job["wid"]) == ("min-woken", "active", "w1")


@pytest.mark.parametrize(
    ("header", "minimal"),
    [
        ("return=minimal", True),
        ("respond-async, return=minimal", True),
        ('Return = "MINIMAL"; extra=1', True),
        ("return=representation", False),
        ("minimal", False),
        ("", False),
    ],
)
def test_prefer_header_parsing(header, minimal):
    assert wants_minimal(header) is minimal


async def test_every_invalid_field_is_named(api, database_url):
    """msgspec stops at the first invalid field; the answer still names each (as many as
    MAX_ERRORS), in a single job and across a batch's items."""
    job = {"jobtype": "", "queue": "a b", "priority": "x", "retry": 2000, "custom": [1]}
    r = await api.http.post("/v1/jobs", json=job)
    assert r.status_code == 422, r.text
    locs = [e["loc"] for e in r.json()["errors"]]
    assert locs == ["jobtype", "queue", "priority", "retry", "custom"]
    jobs = [{"jobtype": "a"}, {"jobtype": "b", "queue": "a b"}, {"jobtype": "c", "jid": "x"}]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert [e["loc"] for e in r.json()["errors"]] == ["jobs.1.queue", "jobs.2.jid"]
    jobs = [{"jobtype": "a", "queue": "a b"}] * (MAX_ERRORS + 5)
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    locs = [e["loc"] for e in r.json()["errors"]]
    assert locs == [f"jobs.{i}.queue" for i in range(MAX_ERRORS)]
    assert await count_jobs(database_url) == 0
