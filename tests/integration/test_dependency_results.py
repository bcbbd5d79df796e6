"""Dependency results within a budget: a fetch answer or a read of a job carries its
dependencies' results only up to WERK_MAX_DEPENDENCY_RESULTS_BYTES in all, so a job with
thousands of large results cannot make one answer unbounded; the rest are marked
result_omitted and read, page by page, from GET /v1/jobs/{jid}/dependencies."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_dependencies import ack, fetch, push

RESULT = {"pad": "x" * 30}
SIZE = len(json.dumps(RESULT))  # the text PostgreSQL writes for it: {"pad": "xxx…"}


async def dependents_of(api, n, dependents=1, result=RESULT):
    """n acked dependencies with ``result`` and ``dependents`` jobs depending on all of them."""
    deps = [f"dr-dep-{i:02}" for i in range(n)]
    for jid in deps:
        await push(api, jid=jid, queue="deps")
    for k in range(dependents):
        await push(api, jid=f"dr-job-{k}", depends_on=deps)
    for job in await fetch(api, queue="deps"):
        await ack(api, job, result)
    return deps


async def pages(api, jid, **params):
    """Every page of jid's dependencies, following next."""
    out = []
    while True:
        r = await api.http.get(f"/v1/jobs/{jid}/dependencies", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        out.append(body["dependencies"])
        if body["next"] is None:
            return out
        params = {**params, "cursor": body["next"]}


@pytest.fixture
async def small(make_api):
    return await make_api(max_dependency_results_bytes=SIZE * 2 + 5)


async def test_a_fetch_carries_results_up_to_the_budget_and_marks_the_rest(small):
    deps = await dependents_of(small, 5)
    (job,) = await fetch(small)
    got = job["dependencies"]
    assert [d["jid"] for d in got] == deps
    assert [d["result"] for d in got] == [RESULT, RESULT, None, None, None]
    assert [d.get("result_omitted", False) for d in got] == [False, False, True, True, True]
    assert all(d["outcome"] == "completed" for d in got)
    # A read of the job keeps the same budget.
    read = (await small.http.get("/v1/jobs/dr-job-0")).json()["dependencies"]
    assert read == got


async def test_the_pages_hold_every_result_within_the_budget_each(small):
    deps = await dependents_of(small, 5)
    got = await pages(small, "dr-job-0")
    assert [len(p) for p in got] == [2, 2, 1]
    flat = [d for p in got for d in p]
    assert [d["jid"] for d in flat] == deps
    assert all(d["result"] == RESULT and "result_omitted" not in d for d in flat)
    # limit bounds a page however small its results.
    assert [len(p) for p in await pages(small, "dr-job-0", limit=1)] == [1] * 5


async def test_one_answer_shares_its_budget_among_the_jobs_it_carries(small):
    await dependents_of(small, 2, dependents=2)
    first, second = sorted(await fetch(small), key=lambda j: j["jid"])
    assert all("result_omitted" not in d for d in first["dependencies"])
    assert all(d["result_omitted"] for d in second["dependencies"])
    assert [d["result"] for p in await pages(small, second["jid"]) for d in p] == [RESULT] * 2


async def test_a_result_larger_than_the_budget_still_fills_a_page_of_its_own(make_api):
    api = await make_api(max_dependency_results_bytes=10)
    await dependents_of(api, 3)
    (job,) = await fetch(api)
    assert all(d["result_omitted"] and d["result"] is None for d in job["dependencies"])
    got = await pages(api, "dr-job-0")
    assert [[d["result"] for d in p] for p in got] == [[RESULT]] * 3


async def test_dependencies_without_results_are_never_omitted(small):
    await dependents_of(small, 6, result=None)
    (job,) = await fetch(small)
    assert len(job["dependencies"]) == 6
    assert all("result_omitted" not in d for d in job["dependencies"])
    assert [len(p) for p in await pages(small, "dr-job-0")] == [6]


async def test_the_default_budget_carries_ordinary_results_whole(api):
    await dependents_of(api, 20)
    (job,) = await fetch(api)
    assert [d["result"] for d in job["dependencies"]] == [RESULT] * 20
    assert all("result_omitted" not in d for d in job["dependencies"])


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/v1/jobs/no-such-job/dependencies", 404, "job_not_found"),
        ("/v1/jobs/dr-job-0/dependencies?cursor=%00", 422, "invalid_request"),
        ("/v1/jobs/dr-job-0/dependencies?limit=0", 422, "invalid_request"),
        ("/v1/jobs/dr-job-0/dependencies?limit=1001", 422, "invalid_request"),
    ],
)
async def test_bad_page_requests_are_refused(api, path, status, code):
    r = await api.http.get(path)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == code


async def test_a_job_without_dependencies_has_an_empty_page(api):
    await push(api, jid="dr-alone")
    r = await api.http.get("/v1/jobs/dr-alone/dependencies")
    assert r.status_code == 200 and r.json() == {"dependencies": [], "next": None}


async def test_the_dashboard_job_page_says_which_results_it_left_out(small):
    await dependents_of(small, 3)
    page = (await small.http.get("/jobs/dr-job-0")).text
    assert page.count("not shown: the results above fill this page") == 1
    assert page.count("&#34;result_omitted&#34;: true") == 1  # the job's JSON, as read


# Dependencies listed within a budget: a fetch of a hundred jobs with thousands of dependencies
# each would otherwise answer a million edges (hundreds of megabytes) on every fetch of their
# queue. One answer lists WERK_MAX_DEPENDENCIES_LISTED in all, in jid order; a job listed in part,
# or not at all, says dependencies_omitted, and its pages hold every one.


@pytest.fixture
async def few_listed(make_api):
    return await make_api(max_dependencies_listed=5)


async def test_an_answer_lists_dependencies_up_to_the_budget_across_its_jobs(few_listed):
    api = few_listed
    deps = await dependents_of(api, 3, dependents=3)
    first, second, third = sorted(await fetch(api, count=3), key=lambda j: j["jid"])
    assert [d["jid"] for d in first["dependencies"]] == deps
    assert "dependencies_omitted" not in first
    assert [d["jid"] for d in second["dependencies"]] == deps[:2]
    assert second["dependencies_omitted"] is True
    assert third["dependencies"] == []
    assert third["dependencies_omitted"] is True
    # What a job lists is the start of its pages, which hold every dependency and result.
    for job in (second, third):
        listed = [d for p in await pages(api, job["jid"]) for d in p]
        assert [d["jid"] for d in listed] == deps
        assert listed[: len(job["dependencies"])] == job["dependencies"]
        rest = await pages(api, job["jid"], cursor=deps[1])
        assert [d["jid"] for p in rest for d in p] == deps[2:]


async def test_a_read_of_one_job_lists_within_the_same_budget(make_api):
    api = await make_api(max_dependencies_listed=2)
    deps = await dependents_of(api, 3)
    read = (await api.http.get("/v1/jobs/dr-job-0")).json()
    assert [d["jid"] for d in read["dependencies"]] == deps[:2]
    assert read["dependencies_omitted"] is True
    assert all(d["result"] == RESULT for d in read["dependencies"])


async def test_a_job_within_the_budget_says_nothing_of_omission(few_listed):
    await dependents_of(few_listed, 5)
    (job,) = await fetch(few_listed)
    assert len(job["dependencies"]) == 5
    assert "dependencies_omitted" not in job
    read = (await few_listed.http.get("/v1/jobs/dr-job-0")).json()
    assert "dependencies_omitted" not in read


async def test_the_dashboard_job_page_says_it_shows_only_the_first_dependencies(make_api):
    api = await make_api(max_dependencies_listed=2)
    await dependents_of(api, 3)
    page = (await api.http.get("/jobs/dr-job-0")).text
    assert page.count("Only the first 2 dependencies are shown") == 1
    assert page.count("dr-dep-02") == 0
