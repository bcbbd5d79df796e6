"""A queue name is a URL path segment too (/v1/queues/{queue}/pause): "." and "..", which clients
and browsers resolve as dot segments, are refused wherever a queue is named, and nothing is
stored; every other name of the rule's characters stays valid."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import InProcess
from tests.support.helpers import count_jobs
from werk.domain.job import QUEUE_PATTERN

DOT_SEGMENTS = [".", ".."]
NEAR_DOTS = [".a", "a.", "..a", "...", "-", "_"]


def invalid(r: httpx.Response, loc: str) -> None:
    assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert loc in [e["loc"] for e in r.json()["errors"]], r.text


def test_the_pattern_is_the_old_rule_less_the_dot_segments() -> None:
    """Checked over every short name of the rule's characters and a few others, and at the
    length bound."""
    alphabet = "a.Z9_-/ "
    names = [""]
    for _ in range(5):
        names = [n + c for n in names for c in alphabet]
        for name in names:
            old = re.fullmatch(r"[A-Za-z0-9._-]{1,100}", name) is not None
            assert (re.fullmatch(QUEUE_PATTERN, name) is not None) == (
                old and name not in DOT_SEGMENTS
            ), name
    for prefix in ("", ".", "..", "a"):
        for length in (99, 100, 101):
            name = (prefix + "." * length)[:length]
            assert (re.fullmatch(QUEUE_PATTERN, name) is not None) == (length <= 100), name


@pytest.mark.parametrize("queue", DOT_SEGMENTS)
async def test_a_push_to_a_dot_segment_queue_is_invalid(
    api: InProcess, database_url: str, queue: str
) -> None:
    r = await api.http.post("/v1/jobs", json={"jobtype": "t", "queue": queue})
    invalid(r, "queue")
    jobs = [{"jobtype": "t", "queue": "fine"}, {"jobtype": "t", "queue": queue}]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    invalid(r, "jobs.1.queue")
    r = await api.http.post("/v1/batches", json={"on_success": {"jobtype": "t", "queue": queue}})
    invalid(r, "on_success.queue")
    assert await count_jobs(database_url) == 0
    assert (await api.http.get("/v1/batches")).json()["batches"] == []


@pytest.mark.parametrize("queue", DOT_SEGMENTS)
async def test_a_fetch_from_a_dot_segment_queue_is_invalid(api: InProcess, queue: str) -> None:
    r = await api.http.post("/v1/fetch", json={"queues": ["default", queue], "wid": "w"})
    invalid(r, "queues.1")


@pytest.mark.parametrize("queue", DOT_SEGMENTS)
async def test_the_admin_routes_refuse_a_dot_segment_queue(
    api: InProcess, database_url: str, queue: str
) -> None:
    """Sent percent-encoded, as a client that does not resolve dot segments would."""
    segment = queue.replace(".", "%2E")
    for method, url in (
        ("GET", f"/v1/queues/{segment}"),
        ("POST", f"/v1/queues/{segment}/pause"),
        ("POST", f"/v1/queues/{segment}/resume"),
        ("DELETE", f"/v1/queues/{segment}/jobs"),
    ):
        invalid(await api.http.request(method, url), "queue")
    invalid(await api.http.get("/v1/jobs", params={"queue": queue}), "queue")
    invalid(await api.http.get("/v1/history", params={"queue": queue}), "queue")
    invalid(await api.http.post("/v1/jobs/delete", json={"queue": queue}), "queue")
    assert await count_jobs(database_url) == 0
    assert (await api.http.get("/v1/queues")).json()["queues"] == []


@pytest.mark.parametrize("queue", NEAR_DOTS)
async def test_names_near_the_dot_segments_are_queues_as_any_other(
    api: InProcess, queue: str
) -> None:
    r = await api.http.post("/v1/jobs", json={"jobtype": "t", "jid": "near-dots-1", "queue": queue})
    assert r.status_code == 201, r.text
    r = await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "t", "queue": queue}]})
    assert r.status_code == 201, r.text
    r = await api.http.post("/v1/batches", json={"on_success": {"jobtype": "t", "queue": queue}})
    assert r.status_code == 201, r.text
    assert (await api.http.post(f"/v1/queues/{queue}/pause")).json()["paused"] is True
    assert (await api.http.post(f"/v1/queues/{queue}/resume")).json()["paused"] is False
    assert (await api.http.get(f"/v1/queues/{queue}")).json()["size"] == 2
    listed = (await api.http.get("/v1/jobs", params={"queue": queue})).json()["jobs"]
    assert len(listed) == 3  # the callback waits in the queue too
    r = await api.http.post("/v1/fetch", json={"queues": [queue], "wid": "w", "count": 5})
    assert len(r.json()["jobs"]) == 2, r.text
