"""Group commit of concurrent pushes and acks: one statement for many requests, each answered
with its own result, and a bad item never fails the others."""

from __future__ import annotations

import asyncio

from tests.support.helpers import count_jobs, sql
from werk.db import queries
from werk.services.writers import CLAIM_MAX, Coalescer


async def test_concurrent_single_pushes_are_stored_and_answered_individually(api, database_url):
    bodies = [{"jobtype": "g", "jid": f"group-{i:04d}", "args": [i]} for i in range(200)]
    responses = await asyncio.gather(*(api.http.post("/v1/jobs", json=b) for b in bodies))
    assert [r.status_code for r in responses] == [201] * 200
    assert [r.json()["args"] for r in responses] == [[i] for i in range(200)]
    assert await count_jobs(database_url) == 200


async def test_same_jid_pushed_concurrently_is_stored_once(api, database_url):
    bodies = [{"jobtype": "g", "jid": "same-jid-00", "args": [i]} for i in range(20)]
    responses = await asyncio.gather(*(api.http.post("/v1/jobs", json=b) for b in bodies))
    assert [r.status_code for r in responses] == [201] * 20
    assert sorted(r.json()["created"] for r in responses) == [False] * 19 + [True]
    stored = {tuple(r.json()["args"]) for r in responses}
    assert len(stored) == 1  # everyone sees the one stored job
    assert await count_jobs(database_url) == 1


async def test_concurrent_single_acks(api, database_url):
    jobs = [{"jobtype": "g"} for _ in range(100)]
    await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    fetched = (
        await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w", "count": 100})
    ).json()["jobs"]
    stale = fetched[0]
    acks = [api.http.post(f"/v1/jobs/{j['jid']}/ack", json={"lease": j["lease"]}) for j in fetched]
    acks.append(
        api.http.post(
            f"/v1/jobs/{stale['jid']}/ack", json={"lease": "00000000-0000-0000-0000-000000000000"}
        )
    )
    responses = await asyncio.gather(*acks)
    assert [r.status_code for r in responses[:-1]] == [204] * 100
    assert responses[-1].status_code in (404, 409)  # stale lease: lost, or job already gone
    assert await count_jobs(database_url) == 0


async def test_concurrent_batch_and_single_acks_share_statements(api, database_url, monkeypatch):
    """Batch acks coalesce with each other and with single acks; each request hears only of its
    own items, a stale lease in one batch included (here for a job another batch acks)."""
    await api.http.post("/v1/jobs/batch", json={"jobs": [{"jobtype": "g"}] * 330})
    fetched = [
        (
            await api.http.post(
                "/v1/fetch", json={"queues": ["default"], "wid": f"w{i}", "count": count}
            )
        ).json()["jobs"]
        for i, count in enumerate((100, 100, 100, 30))
    ]
    statements: list[int] = []
    real_ack_jobs = queries.ack_jobs

    async def counting_ack_jobs(db, now, jids, *args, **kwargs):
        statements.append(len(jids))
        return await real_ack_jobs(db, now, jids, *args, **kwargs)

    monkeypatch.setattr(queries, "ack_jobs", counting_ack_jobs)
    stale = {"jid": fetched[0][0]["jid"], "lease": "00000000-0000-0000-0000-000000000000"}
    unknown = {"jid": "no-such-job-0", "lease": fetched[1][0]["lease"]}
    batches = [
        [{"jid": j["jid"], "lease": j["lease"]} for j in fetched[0]],
        [stale, *({"jid": j["jid"], "lease": j["lease"]} for j in fetched[1]), unknown],
        [{"jid": j["jid"], "lease": j["lease"]} for j in fetched[2]],
    ]
    singles = fetched[3]
    responses = await asyncio.gather(
        *(api.http.post("/v1/ack", json={"acks": b}) for b in batches),
        *(api.http.post(f"/v1/jobs/{j['jid']}/ack", json={"lease": j["lease"]}) for j in singles),
    )
    answers = [r.json() for r in responses[:3]]
    assert answers[0] == {"acked": [j["jid"] for j in fetched[0]], "lease_lost": []}
    assert answers[1] == {
        "acked": [j["jid"] for j in fetched[1]],
        "lease_lost": [stale["jid"], unknown["jid"]],
    }
    assert answers[2] == {"acked": [j["jid"] for j in fetched[2]], "lease_lost": []}
    assert [r.status_code for r in responses[3:]] == [204] * 30
    assert await count_jobs(database_url) == 0
    # Every ack item was written once, and some statement wrote items of several requests (no
    # request has more than 102). When the stale lease and its job's current lease meet in one
    # flush, the stale one goes to a statement of its own (one lease per jid and statement).
    assert sum(statements) == 332
    assert max(statements) > 102


async def test_concurrent_fetches_over_different_queues_share_a_flush(
    api, database_url, monkeypatch
):
    """Fetches waiting on the claim coalescer are served by one statement per queue list, at
    most CLAIM_MAX jobs a flush: statements over different queues run side by side, those over
    the same queues one after another (side by side, the second would try every row the first
    holds locked). Each fetch gets its own jobs."""
    wanted = ["qa"] * (CLAIM_MAX // 100 + 2) + ["qb"] * 6  # qa: more than CLAIM_MAX jobs at once
    for queue in wanted:
        jobs = [{"jobtype": "g", "queue": queue} for _ in range(100)]
        assert (await api.http.post("/v1/jobs/batch", json={"jobs": jobs})).status_code == 201
    running: dict[tuple[str, ...], int] = {}
    most: dict[tuple[str, ...], int] = {}  # statements over one queue list at once, at most
    statements: list[tuple[str, ...]] = []
    real_fetch_jobs = queries.fetch_jobs

    async def watched_fetch_jobs(db, now, queues, slots):
        key = tuple(queues)
        statements.append(key)
        running[key] = running.get(key, 0) + 1
        most[key] = max(most.get(key, 0), running[key])
        try:
            await asyncio.sleep(0.01)  # time for another statement to start, were it allowed
            return await real_fetch_jobs(db, now, queues, slots)
        finally:
            running[key] -= 1

    monkeypatch.setattr(queries, "fetch_jobs", watched_fetch_jobs)
    responses = await asyncio.gather(
        *(
            api.http.post("/v1/fetch", json={"queues": [q], "wid": f"w{i}", "count": 100})
            for i, q in enumerate(wanted)
        )
    )
    fetched = [r.json()["jobs"] for r in responses]
    assert [len(jobs) for jobs in fetched] == [100] * len(wanted)
    for i, (queue, jobs) in enumerate(zip(wanted, fetched, strict=True)):
        assert {j["queue"] for j in jobs} == {queue}
        assert {j["wid"] for j in jobs} == {f"w{i}"}
    assert len({j["jid"] for jobs in fetched for j in jobs}) == 100 * len(wanted)
    active = await sql(database_url, "SELECT count(*) AS n FROM werk_jobs WHERE state = 'active'")
    assert active[0]["n"] == 100 * len(wanted)
    assert statements.count(("qa",)) >= 2
    assert most == {("qa",): 1, ("qb",): 1}


async def test_coalescer_batches_while_a_write_is_in_flight():
    batches: list[list[int]] = []
    gate = asyncio.Event()

    async def write(items):
        batches.append(list(items))
        await gate.wait()
        return [ValueError("odd") if i % 2 else i * 10 for i in items]

    c: Coalescer[int, int] = Coalescer(write, max_items=3)
    tasks = [asyncio.create_task(c.submit(i)) for i in range(7)]
    await asyncio.sleep(0.01)
    gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]
    assert [r if isinstance(r, int) else "err" for r in results] == [
        0,
        "err",
        20,
        "err",
        40,
        "err",
        60,
    ]


async def test_coalescer_weighs_items_against_the_limit():
    """Items that are batches count by their size: a write takes them while they fit, and one
    heavier than the limit goes alone."""
    batches: list[list[str]] = []
    gate = asyncio.Event()

    async def write(items):
        batches.append(list(items))
        await gate.wait()
        return [len(item) for item in items]

    c: Coalescer[str, int] = Coalescer(write, max_items=5, weight=len)
    tasks = [asyncio.create_task(c.submit(s)) for s in ("a", "bb", "ccc", "dd", "eeeeeeee", "f")]
    await asyncio.sleep(0.01)
    gate.set()
    assert await asyncio.gather(*tasks) == [1, 2, 3, 2, 8, 1]
    assert batches == [["a", "bb"], ["ccc", "dd"], ["eeeeeeee"], ["f"]]
