"""Unique jobs over HTTP against a real PostgreSQL: the key, each until and on_conflict mode, the
time bound, release on ack, dead and expiry, and batches."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.helpers import count_jobs, sql

FETCH = {"queues": ["default"], "wid": "w1", "count": 10}


async def push(api: Any, unique: dict[str, Any], **job: Any) -> Any:
    return await api.http.post(
        "/v1/jobs", json={"jobtype": "report", "args": [1], **job, "unique": unique}
    )


async def fetch(api: Any) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = (await api.http.post("/v1/fetch", json=FETCH)).json()["jobs"]
    return jobs


async def test_reject_names_the_holder_and_stores_nothing(api, database_url):
    first = await push(api, {})
    assert first.status_code == 201
    holder = first.json()
    assert holder["unique"]["until"] == "success"
    assert holder["unique"]["on_conflict"] == "reject"
    assert holder["unique"]["key"].startswith("sha256:")
    second = await push(api, {})
    assert second.status_code == 409
    assert second.headers["content-type"] == "application/problem+json"
    problem = second.json()
    assert problem["code"] == "not_unique" and problem["existing_jid"] == holder["jid"]
    assert await count_jobs(database_url) == 1


async def test_the_key_reads_args_as_canonical_json(api, database_url):
    first = await push(api, {}, args=[600, {"a": 1, "b": [2.0]}])
    same = await push(api, {}, args=[600.0, {"b": [2], "a": 1.0}])
    assert same.status_code == 409 and same.json()["existing_jid"] == first.json()["jid"]
    other_queue = await push(api, {}, args=[600, {"a": 1, "b": [2]}], queue="other")
    other_type = await push(api, {}, args=[600, {"a": 1, "b": [2]}], jobtype="mail")
    other_args = await push(api, {}, args=[601, {"a": 1, "b": [2]}])
    assert [r.status_code for r in (other_queue, other_type, other_args)] == [201] * 3
    assert await count_jobs(database_url) == 4


async def test_by_hashes_only_the_listed_paths_and_key_names_the_lock(api):
    by = {"by": ["args.0.user", "custom.tenant"]}
    first = await push(api, by, args=[{"user": 7, "n": 1}], custom={"tenant": "a"})
    same = await push(api, by, args=[{"user": 7, "n": 2}], custom={"tenant": "a", "x": 1})
    other = await push(api, by, args=[{"user": 7, "n": 1}], custom={"tenant": "b"})
    assert first.status_code == 201 and other.status_code == 201
    assert same.status_code == 409 and same.json()["existing_jid"] == first.json()["jid"]
    named = await push(api, {"key": "nightly-report"}, jobtype="a", args=[1])
    clash = await push(api, {"key": "nightly-report"}, jobtype="b", args=[2])
    assert named.json()["unique"]["key"] == "nightly-report"
    assert clash.json()["existing_jid"] == named.json()["jid"]


async def test_existing_answers_200_with_the_stored_job(api, database_url):
    first = (await push(api, {"on_conflict": "existing"})).json()
    again = await push(api, {"on_conflict": "existing"}, args=[1])
    assert again.status_code == 200
    body = again.json()
    assert body["jid"] == first["jid"] and body["duplicate"] is True and body["created"] is False
    assert await count_jobs(database_url) == 1


async def test_replace_updates_a_waiting_holder_args_and_at(api, database_url):
    at = (api.clock.now() + timedelta(minutes=5)).isoformat()
    first = (await push(api, {"on_conflict": "replace", "key": "debounce"}, at=at)).json()
    assert first["state"] == "scheduled"
    later = (api.clock.now() + timedelta(minutes=10)).isoformat()
    again = await push(api, {"on_conflict": "replace", "key": "debounce"}, args=[2], at=later)
    assert again.status_code == 200
    body = again.json()
    assert body["jid"] == first["jid"] and body["duplicate"] is True
    assert body["args"] == [2] and body["at"] == later.replace("+00:00", "Z")
    now = await push(api, {"on_conflict": "replace", "key": "debounce"}, args=[3])
    assert now.json()["state"] == "available" and now.json()["args"] == [3]
    assert await count_jobs(database_url) == 1
    (taken,) = await fetch(api)
    assert taken["jid"] == first["jid"] and taken["args"] == [3]


async def test_replace_gives_the_holder_the_push_s_expiry(api, database_url):
    """An expiry counted from the holder's `at` would come before the new `at`: the job could
    only expire. The holder takes the push's expiry, or none."""
    spec = {"on_conflict": "replace", "key": "debounce-expiry"}
    t1, t2 = (api.clock.now() + timedelta(days=d) for d in (1, 2))
    first = (await push(api, spec, at=t1.isoformat(), expires_in=60)).json()
    assert first["expires_at"] == (t1 + timedelta(seconds=60)).isoformat().replace("+00:00", "Z")
    again = (await push(api, spec, at=t2.isoformat())).json()
    assert again["jid"] == first["jid"] and again.get("expires_at") is None
    again = (await push(api, spec, at=t2.isoformat(), expires_in=30)).json()
    assert again["expires_at"] == (t2 + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    assert (await api.http.get(f"/v1/jobs/{first['jid']}")).json()["expires_at"] == again[
        "expires_at"
    ]


async def test_replace_never_touches_an_active_holder_a_new_job_waits(api, database_url):
    unique = {"on_conflict": "replace", "key": "debounce"}
    first = (await push(api, unique)).json()
    (active,) = await fetch(api)
    assert active["jid"] == first["jid"]
    again = await push(api, unique, args=[2])
    assert again.status_code == 201
    second = again.json()
    assert second["jid"] != first["jid"] and second["args"] == [2]
    stored = (await api.http.get(f"/v1/jobs/{first['jid']}")).json()
    assert stored["args"] == [1] and stored["state"] == "active"
    # The new job now holds the key: a further push replaces it, not the active one.
    third = await push(api, unique, args=[3])
    assert third.status_code == 200 and third.json()["jid"] == second["jid"]
    assert await count_jobs(database_url) == 2
    # The active one settles without disturbing the new holder.
    r = await api.http.post(f"/v1/jobs/{first['jid']}/ack", json={"lease": active["lease"]})
    assert r.status_code == 204
    assert (await push(api, unique, args=[4])).json()["jid"] == second["jid"]


async def test_until_success_holds_while_active_and_ack_releases(api):
    first = (await push(api, {})).json()
    (job,) = await fetch(api)
    assert (await push(api, {})).json()["existing_jid"] == first["jid"]
    await api.http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
    assert (await push(api, {})).status_code == 201


async def test_until_start_releases_when_a_worker_takes_the_job(api):
    first = (await push(api, {"until": "start"})).json()
    assert (await push(api, {"until": "start"})).json()["existing_jid"] == first["jid"]
    (job,) = await fetch(api)
    second = await push(api, {"until": "start"})
    assert second.status_code == 201
    # The first fails and retries: it does not take the key back.
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"], "retry_in": 0}
    )
    assert r.json()["state"] == "scheduled"
    assert (await push(api, {"until": "start"})).json()["existing_jid"] == second.json()["jid"]


async def test_a_retrying_job_keeps_its_lock_until_success(api):
    first = (await push(api, {})).json()
    (job,) = await fetch(api)
    await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"]})
    assert (await push(api, {})).json()["existing_jid"] == first["jid"]


async def test_dead_releases_the_lock(api):
    await push(api, {}, retry=-1)
    (job,) = await fetch(api)
    await api.http.post(f"/v1/jobs/{job['jid']}/fail", json={"lease": job["lease"]})
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "dead"
    assert (await push(api, {})).status_code == 201
    # Retried by an operator, the dead job runs without its lock (the key is held again).
    r = await api.http.post(f"/v1/jobs/{job['jid']}/retry")
    assert r.status_code < 300, r.text
    assert (await api.http.get(f"/v1/jobs/{job['jid']}")).json()["state"] == "available"


async def test_the_time_bound_counts_from_at(api):
    at = api.clock.now() + timedelta(seconds=100)
    first = (await push(api, {"for": 60}, at=at.isoformat())).json()
    api.clock.advance(150)  # due, but at + 60 s not passed
    assert (await push(api, {"for": 60}, at=at.isoformat())).status_code == 409
    api.clock.advance(11)
    second = await push(api, {"for": 60})
    assert second.status_code == 201 and second.json()["jid"] != first["jid"]
    # The first job is still there; it no longer holds the key.
    assert (await api.http.get(f"/v1/jobs/{first['jid']}")).json()["state"] == "scheduled"
    assert (await push(api, {"for": 60})).json()["existing_jid"] == second.json()["jid"]


async def test_expiry_releases_the_lock(api):
    first = (await push(api, {}, expires_in=30)).json()
    api.clock.advance(31)
    assert (await api.maintain())["expired"] == 1
    assert (await api.http.get(f"/v1/jobs/{first['jid']}")).json()["state"] == "expired"
    assert (await push(api, {})).status_code == 201


async def test_a_batch_reports_conflicts_per_item_and_stores_the_rest(api, database_url):
    holder = (await push(api, {"key": "k1"})).json()
    jobs = [
        {"jobtype": "a", "unique": {"key": "k1"}},
        {"jobtype": "b", "unique": {"key": "k1b"}},
        {"jobtype": "c"},
        {"jobtype": "d", "unique": {"key": "k1", "on_conflict": "existing"}},
    ]
    # Two items with one key are the batch's own error: nothing stored.
    bad = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["loc"] == "jobs.3.unique"
    assert await count_jobs(database_url) == 1
    jobs[3]["unique"]["key"] = "k1b-other"
    jobs.append({"jobtype": "e", "unique": {"key": "k1", "on_conflict": "replace"}, "args": [9]})
    del jobs[0]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201
    body = r.json()
    assert body["created"] == 3
    assert body["jids"][3] == holder["jid"] and body["jobs"][3]["args"] == [9]
    assert body["conflicts"] == [
        {"index": 3, "existing_jid": holder["jid"], "on_conflict": "replace"}
    ]
    again = await api.http.post(
        "/v1/jobs/batch",
        json={"jobs": [jobs[0], {"jobtype": "f"}]},
        headers={"Prefer": "return=minimal"},
    )
    short = again.json()
    assert short["created"] == 1 and short["jids"][0] == body["jids"][0]
    assert short["conflicts"] == [
        {"index": 0, "existing_jid": body["jids"][0], "on_conflict": "reject"}
    ]
    assert "jobs" not in short


async def test_an_existing_jid_with_a_unique_lock_answers_the_stored_job(api):
    first = await push(api, {"key": "x1"}, jid="fixed-jid-1")
    again = await push(api, {"key": "x1"}, jid="fixed-jid-1")
    assert first.status_code == 201 and again.status_code == 201
    assert again.json()["created"] is False and again.json()["jid"] == "fixed-jid-1"


async def test_concurrent_pushes_in_one_process_store_one(api, database_url):
    answers = await asyncio.gather(*(push(api, {"on_conflict": "existing"}) for _ in range(50)))
    jids = {a.json()["jid"] for a in answers}
    assert len(jids) == 1
    assert sorted(a.status_code for a in answers) == [200] * 49 + [201]
    rows = await sql(database_url, "SELECT jid FROM werk_jobs")
    assert [r["jid"] for r in rows] == list(jids)


async def test_invalid_unique_requests_are_refused(api, database_url):
    for unique in (
        {"key": "a", "by": ["args.0"]},
        {"until": "never"},
        {"on_conflict": "merge"},
        {"for": 0},
        {"by": ["kwargs.0"]},
        {"key": ""},
        {"extra": 1},
    ):
        r = await push(api, unique)
        assert r.status_code == 422, unique
    r = await api.http.post(
        "/v1/jobs",
        json={"jobtype": "a", "expires_in": 5, "expires_at": "2030-01-01T00:00:00Z"},
    )
    assert r.status_code == 422
    assert [e["loc"] for e in r.json()["errors"]] == ["expires_in"]
    r = await api.http.post(
        "/v1/jobs/batch",
        json={
            "jobs": [
                {"jobtype": "a"},
                {"jobtype": "a", "expires_in": 5, "expires_at": "2030-01-01T00:00:00Z"},
            ]
        },
    )
    assert r.status_code == 422
    assert [e["loc"] for e in r.json()["errors"]] == ["jobs.1.expires_in"]
    assert await count_jobs(database_url) == 0


async def test_a_fetch_whose_client_left_hands_the_job_back_under_its_lock(
    werk_server, database_url
):
    """A real fetch reserves a job locked until start while its client disconnects: the job
    comes back with its key, so the same push is still refused."""
    unique = {"until": "start"}
    async with httpx.AsyncClient(base_url=werk_server.url, timeout=10) as http:
        first = await http.post("/v1/jobs", json={"jobtype": "report", "unique": unique})
        assert first.status_code == 201
        blocker = await asyncpg.connect(database_url)
        try:
            # The fetch's claim waits behind this lock until its client has gone.
            tx = blocker.transaction()
            await tx.start()
            await blocker.execute("LOCK TABLE werk_jobs IN SHARE MODE")
            fetch = {"queues": ["default"], "wid": "ghost", "count": 1, "wait": 5}
            async with httpx.AsyncClient(base_url=werk_server.url, timeout=1.0) as ghost:
                with pytest.raises(httpx.ReadTimeout):
                    await ghost.post("/v1/fetch", json=fetch)
            await asyncio.sleep(0.3)  # the server has seen the connection close
            waiting = await blocker.fetchval(
                "SELECT count(*) FROM pg_locks WHERE relation = 'werk_jobs'::regclass"
                " AND NOT granted"
            )
            assert waiting >= 1  # the claim is behind the lock, not yet done
            await tx.commit()
        finally:
            await blocker.close()
        row = None
        for _ in range(100):  # the claim runs, then its jobs are handed back
            (row,) = await sql(
                database_url, "SELECT state, attempt, wid, unique_key FROM werk_jobs"
            )
            if row["state"] == "available" and row["attempt"] == 0:
                break
            await asyncio.sleep(0.05)
        assert row is not None
        assert (row["state"], row["attempt"], row["wid"]) == ("available", 0, None)
        assert row["unique_key"] == first.json()["unique"]["key"]
        again = await http.post("/v1/jobs", json={"jobtype": "report", "unique": unique})
        assert again.status_code == 409
        assert again.json()["existing_jid"] == first.json()["jid"]
        assert await count_jobs(database_url) == 1


async def test_a_job_handed_back_after_its_key_was_taken_comes_back_without_it(api, database_url):
    """While the first job was reserved, the same push stored a second, which keeps the key:
    both jobs are kept, the first one unlocked; of two handed back together, the older takes
    the key."""
    first = (await push(api, {"until": "start"})).json()
    (taken,) = await fetch(api)
    second = (await push(api, {"until": "start"})).json()
    await api.services.claim.hand_back([taken])
    rows = await sql(database_url, "SELECT jid, state, unique_key FROM werk_jobs ORDER BY seq")
    assert [(r["jid"], r["state"], r["unique_key"]) for r in rows] == [
        (first["jid"], "available", None),
        (second["jid"], "available", second["unique"]["key"]),
    ]
    both = await fetch(api)
    assert [j["jid"] for j in both] == [first["jid"], second["jid"]]
    await api.services.claim.hand_back(both)
    rows = await sql(database_url, "SELECT jid, state, unique_key FROM werk_jobs ORDER BY seq")
    assert [(r["jid"], r["state"], r["unique_key"]) for r in rows] == [
        (first["jid"], "available", first["unique"]["key"]),
        (second["jid"], "available", None),
    ]
    assert (await push(api, {"until": "start"})).json()["existing_jid"] == first["jid"]


async def test_a_push_racing_a_hand_back_keeps_the_key(api, database_url):
    """A job taking the key commits while the hand-back is writing: the hand-back is written
    again and brings its job back unlocked, nothing lost and the index never broken."""
    first = (await push(api, {"until": "start"})).json()
    (taken,) = await fetch(api)
    key = first["unique"]["key"]
    racer = await asyncpg.connect(database_url)
    try:
        tx = racer.transaction()
        await tx.start()
        await racer.execute(
            "INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at,"
            " enqueued_at, unique_key, unique_spec) VALUES ('racer-job', 'report', 'default',"
            " '[1]', 'available', now(), now(), now(), $1, $2::jsonb)",
            key,
            f'{{"key": "{key}", "until": "start", "on_conflict": "reject"}}',
        )
        back = asyncio.create_task(api.services.claim.hand_back([taken]))
        for _ in range(100):  # the hand-back waits on the racer's uncommitted key
            waiting = await racer.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted"
            )
            if waiting:
                break
            await asyncio.sleep(0.02)
        assert waiting
        await tx.commit()
        await back
    finally:
        await racer.close()
    rows = await sql(database_url, "SELECT jid, state, unique_key FROM werk_jobs ORDER BY jid")
    assert [(r["jid"], r["state"], r["unique_key"]) for r in rows] == [
        (first["jid"], "available", None),
        ("racer-job", "available", key),
    ]
