"""Admin API for jobs: list with filters and cursors; retry, kill, cancel, delete, one and bulk."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.conftest import InProcess
from tests.integration.admin.support import (
    dead_job,
    fetch_one,
    push,
    retrying_job,
    scheduled_job,
    state_of,
)


async def list_jobs(api: InProcess, **params: Any) -> dict[str, Any]:
    r = await api.http.get("/v1/jobs", params=params)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_list_filters(api: InProcess) -> None:
    a = await push(api, queue="mail", jobtype="Send")
    b = await push(api, queue="mail", jobtype="Bounce")
    c = await push(api, queue="video", jobtype="Send")
    d = await dead_job(api, queue="dead-q", jobtype="Explode")
    r = await retrying_job(api, queue="retry-q")
    s = await scheduled_job(api, queue="later")

    def jids(body: dict[str, Any]) -> set[str]:
        return {j["jid"] for j in body["jobs"]}

    assert jids(await list_jobs(api)) == {a, b, c, d, r, s}
    assert jids(await list_jobs(api, queue="mail")) == {a, b}
    assert jids(await list_jobs(api, jobtype="Send")) == {a, c}
    assert jids(await list_jobs(api, queue="mail", jobtype="Send")) == {a}
    assert jids(await list_jobs(api, state="dead")) == {d}
    assert jids(await list_jobs(api, state="scheduled")) == {r, s}
    assert jids(await list_jobs(api, state="retrying")) == {r}
    assert jids(await list_jobs(api, state="scheduled", failed="false")) == {s}
    assert jids(await list_jobs(api, q="upstream")) == {r}  # message
    assert jids(await list_jobs(api, q="boo")) == {d}  # errtype, case-insensitive
    assert jids(await list_jobs(api, q="100%")) == set()  # % is literal, not a wildcard


async def test_q_matches_words_of_args_and_custom_in_every_state(search_api: InProcess) -> None:
    """Each word of q must begin a word of the job's args or custom values (strings, numbers,
    booleans; not keys), errtype or message, case-insensitively; available and active jobs as
    well as the others, and a job made available again by a retry."""
    api = search_api
    waiting = await push(
        api, queue="a", args=[{"customer": "Acme 42", "n": 7}], custom={"region": "westland"}
    )
    active = await push(api, queue="b", args=["acme"], custom={"tenant": "north"})
    await fetch_one(api, "b")
    dead = await dead_job(api, queue="c", args=[{"order": 991}], custom={"tenant": "acme"})
    retrying = await retrying_job(api, queue="d", args=["invoice 17"])
    other = await push(api, queue="e", args=[{"acme": "key only"}])

    def jids(body: dict[str, Any]) -> set[str]:
        return {j["jid"] for j in body["jobs"]}

    assert jids(await list_jobs(api, q="acme")) == {waiting, active, dead}
    assert jids(await list_jobs(api, q="ACM")) == {waiting, active, dead}  # a word's beginning
    assert jids(await list_jobs(api, q="acme 42")) == {waiting}  # every word
    assert jids(await list_jobs(api, q="991")) == {dead}  # numbers
    assert jids(await list_jobs(api, q="north")) == {active}
    assert jids(await list_jobs(api, q="invoice upstream")) == {retrying}  # args and message
    assert jids(await list_jobs(api, q="acme", state="dead")) == {dead}
    assert jids(await list_jobs(api, q="acme", queue="a")) == {waiting}
    assert jids(await list_jobs(api, q="only")) == {other}
    assert jids(await list_jobs(api, q="%&!'")) == set()  # no word: nothing
    assert jids(await list_jobs(api, q="acme", order="oldest")) == {waiting, active, dead}
    assert jids(await list_jobs(api, q="westland")) == {waiting}  # custom of an available job
    assert jids(await list_jobs(api, q="west", state="available", queue="a")) == {waiting}
    assert jids(await list_jobs(api, q="acme", state="available")) == {waiting}
    assert jids(await list_jobs(api, q="invoice", state="available")) == set()
    assert (await api.http.post(f"/v1/jobs/{retrying}/retry")).status_code == 200
    assert jids(await list_jobs(api, q="invoice", state="available")) == {retrying}
    r = await api.http.post("/v1/jobs/kill", json={"q": "acme 42"})
    assert r.json()["changed"] == 1 and await state_of(api, waiting) == "dead"


async def test_list_pages_newest_and_oldest_first(api: InProcess) -> None:
    pushed = []
    for _ in range(7):
        pushed.append(await push(api, queue="q"))
        api.clock.advance(1)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3, "queue": "q"}
        if cursor:
            params["cursor"] = cursor
        page = await list_jobs(api, **params)
        seen += [j["jid"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == pushed[::-1]
    first = await list_jobs(api, limit=3, order="oldest")
    assert [j["jid"] for j in first["jobs"]] == pushed[:3]
    second = await list_jobs(api, limit=3, order="oldest", cursor=first["next_cursor"])
    assert [j["jid"] for j in second["jobs"]] == pushed[3:6]


async def pages(api: InProcess, **params: Any) -> list[list[str]]:
    """Every page of the list, following next_cursor."""
    found: list[list[str]] = []
    cursor = None
    while True:
        page = await list_jobs(api, **params, **({"cursor": cursor} if cursor else {}))
        found.append([j["jid"] for j in page["jobs"]])
        cursor = page["next_cursor"]
        if cursor is None:
            return found


async def test_available_jobs_are_listed_in_the_order_workers_take_them(api: InProcess) -> None:
    """Available jobs come in claim order (highest priority, then first enqueued), after the
    jobs of the other states, which come by creation time; a page may hold both."""
    dead = await dead_job(api, queue="q")
    api.clock.advance(1)
    low = await push(api, queue="q", priority=-1)
    api.clock.advance(1)
    high = await push(api, queue="q", priority=5)
    api.clock.advance(1)
    scheduled = await scheduled_job(api, queue="q")
    api.clock.advance(1)
    mid = await push(api, queue="q")
    api.clock.advance(1)
    other = await push(api, queue="other", priority=5)

    assert await pages(api, state="available", queue="q", order="oldest") == [[high, mid, low]]
    assert await pages(api, state="available", queue="q") == [[low, mid, high]]
    # across queues, merged on priority then enqueue order
    assert await pages(api, state="available", order="oldest", limit=2) == [
        [high, other], [mid, low]
    ]  # fmt: skip
    assert await pages(api, queue="q", limit=2) == [[scheduled, dead], [low, mid], [high]]
    assert await pages(api, queue="q", limit=3, order="oldest") == [
        [dead, scheduled, high], [mid, low]
    ]  # fmt: skip
    assert (await fetch_one(api, "q"))["jid"] == high


async def test_list_rejects_bad_input(api: InProcess) -> None:
    assert (await api.http.get("/v1/jobs", params={"state": "nope"})).status_code == 422
    r = await api.http.get("/v1/jobs", params={"cursor": "garbage!"})
    assert r.status_code == 422
    assert r.headers["content-type"] == "application/problem+json"
    for forged in ([1001, 1], [0, 2**63], [0, -1], [True, 1]):  # no place in any queue
        cursor = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode().rstrip("=")
        r = await api.http.get("/v1/jobs", params={"cursor": cursor})
        assert r.status_code == 422 and r.json()["code"] == "invalid_request", forged
    assert (await api.http.get("/v1/jobs", params={"limit": 0})).status_code == 422
    assert (await api.http.get("/v1/jobs", params={"queue": "bad queue"})).status_code == 422


async def test_retry_one(api: InProcess) -> None:
    dead = await dead_job(api)
    retrying = await retrying_job(api)
    scheduled = await scheduled_job(api)
    for jid in (dead, retrying, scheduled):
        r = await api.http.post(f"/v1/jobs/{jid}/retry")
        assert r.status_code == 200, r.text
        assert r.json()["state"] == "available"
    # the retried dead job runs again
    fetched = {(await fetch_one(api))["jid"] for _ in range(3)}
    assert fetched == {dead, retrying, scheduled}


async def test_retry_conflict_and_not_found(api: InProcess) -> None:
    jid = await push(api)
    r = await api.http.post(f"/v1/jobs/{jid}/retry")
    assert r.status_code == 409
    assert r.json()["code"] == "job_state_conflict"
    r = await api.http.post("/v1/jobs/nosuchjob123/retry")
    assert r.status_code == 404
    assert r.json()["code"] == "job_not_found"


async def test_kill_one_including_active(api: InProcess) -> None:
    waiting = await push(api)
    active = await push(api)
    held = await fetch_one(api)
    assert held["jid"] == waiting
    r = await api.http.post(f"/v1/jobs/{waiting}/kill")
    assert r.status_code == 200
    body = r.json()
    assert body["state"] == "dead"
    assert body["failure"]["errtype"] == "Killed"
    # the worker holding it lost its lease
    r = await api.http.post(f"/v1/jobs/{waiting}/ack", json={"lease": held["lease"]})
    assert r.status_code == 409
    assert await state_of(api, active) == "available"
    r = await api.http.post(f"/v1/jobs/{waiting}/kill")
    assert r.status_code == 409  # dead already


async def test_cancel_one(api: InProcess) -> None:
    jid = await push(api)
    r = await api.http.post(f"/v1/jobs/{jid}/cancel")
    assert r.status_code == 200
    assert r.json()["state"] == "cancelled"
    fetched = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w"})
    assert fetched.json()["jobs"] == []
    assert (await api.http.post(f"/v1/jobs/{jid}/cancel")).status_code == 409


async def test_delete_one(api: InProcess) -> None:
    jid = await dead_job(api)
    r = await api.http.delete(f"/v1/jobs/{jid}")
    assert r.status_code == 204
    assert await state_of(api, jid) is None
    assert (await api.http.delete(f"/v1/jobs/{jid}")).status_code == 404


@pytest.mark.parametrize(
    ("action", "expected_state"),
    [("retry", "available"), ("kill", None), ("cancel", None), ("delete", None)],
)
async def test_bulk_actions_are_bounded_and_filtered(
    api: InProcess, action: str, expected_state: str | None
) -> None:
    mine = [await dead_job(api, queue="a") for _ in range(3)]
    other = await dead_job(api, queue="b")
    waiting = [await push(api, queue="a") for _ in range(3)]
    body: dict[str, Any] = {"queue": "a", "limit": 2}
    if action in ("retry", "delete"):
        body["state"] = "dead"
        targets = mine
    else:
        body["state"] = "available"
        targets = waiting
    r = await api.http.post(f"/v1/jobs/{action}", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == {"action": action, "changed": 2, "more": True}
    r = await api.http.post(f"/v1/jobs/{action}", json=body)
    assert r.json() == {"action": action, "changed": 1, "more": False}
    r = await api.http.post(f"/v1/jobs/{action}", json=body)
    assert r.json()["changed"] == 0
    want = {"retry": "available", "kill": "dead", "cancel": "cancelled", "delete": None}[action]
    assert [await state_of(api, j) for j in targets] == [want] * 3
    assert await state_of(api, other) == "dead"  # another queue: untouched


async def test_bulk_retry_by_text_and_jobtype(api: InProcess) -> None:
    a = await dead_job(api, jobtype="Mail")
    b = await dead_job(api, jobtype="Video")
    r = await api.http.post("/v1/jobs/retry", json={"jobtype": "Mail"})
    assert r.json()["changed"] == 1
    assert await state_of(api, a) == "available"
    r = await api.http.post("/v1/jobs/retry", json={"q": f"dead {b}"})
    assert r.json()["changed"] == 1
    assert await state_of(api, b) == "available"


async def test_bulk_validates(api: InProcess) -> None:
    r = await api.http.post("/v1/jobs/retry", json={"limit": 10_001})
    assert r.status_code == 422
    r = await api.http.post("/v1/jobs/kill", json={"unknown": 1})
    assert r.status_code == 422


async def test_history_counts_survive_deletion(api: InProcess) -> None:
    jid = await push(api)
    job = await fetch_one(api)
    r = await api.http.post(f"/v1/jobs/{jid}/ack", json={"lease": job["lease"]})
    assert r.status_code == 204
    await dead_job(api)
    await api.http.post("/v1/jobs/delete", json={})
    r = await api.http.get("/v1/history", params={"days": 7})
    assert r.status_code == 200
    days = r.json()["days"]
    assert len(days) == 7
    today = days[-1]
    assert today["day"] == api.clock.now().date().isoformat()
    assert (today["processed"], today["failed"], today["pushed"]) == (2, 1, 2)
    assert all(d["processed"] == 0 for d in days[:-1])
    assert (await api.http.get("/v1/history", params={"days": 0})).status_code == 422
