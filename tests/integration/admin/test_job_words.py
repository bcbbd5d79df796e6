"""A job's search words are bounded: a job whose words PostgreSQL could not hold as one tsvector
(over 1 MiB, from a body under the size limit) moves through every state the words indexes cover,
and the words of its first 65,536 characters are searched."""

from __future__ import annotations

import asyncio
import itertools
import string
from datetime import timedelta
from typing import Any

import asyncpg
import orjson

from tests.conftest import InProcess
from tests.integration.admin.support import fail, fetch_one, push

BOUND = 65536


def words(size: int) -> str:
    """Different words, ``size`` bytes of them in UTF-8: each begins with twenty 'Ⱥ' (two bytes),
    which lowercase to 'ⱥ' (three), so their lexemes take half as much again."""
    out, taken = [], 0
    for letters in itertools.product(string.ascii_lowercase, repeat=4):
        word = "Ⱥ" * 20 + "".join(letters)
        out.append(word)
        taken += len(word.encode()) + 1
        if taken >= size:
            return " ".join(out)
    raise AssertionError("not enough words")


# Under the body size limit (1 MiB), beginning with "needle" and ending with "farend"; its
# lexemes would take over the 1 MiB a tsvector holds.
HUGE = " ".join(["needle", words(1_000_000), "farend"])


async def push_huge(api: InProcess, **job: Any) -> str:
    body = orjson.dumps({"jobtype": "Report", "queue": "huge", "args": [HUGE], **job})
    r = await api.http.post("/v1/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 201, r.text
    jid: str = r.json()["jid"]
    return jid


async def search(api: InProcess, q: str, **params: Any) -> set[str]:
    r = await api.http.get("/v1/jobs", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return {j["jid"] for j in r.json()["jobs"]}


async def test_a_job_with_more_words_than_a_tsvector_holds_reaches_every_state(
    search_api: InProcess,
) -> None:
    api = search_api
    later = (api.clock.now() + timedelta(hours=1)).isoformat()
    scheduled = await push_huge(api, at=later)
    failed = await push_huge(api, retry=3)
    kept = await push_huge(api, keep_result_for=60)
    killed = await push_huge(api)

    job = await fetch_one(api, "huge")
    assert job["jid"] == failed
    assert (await fail(api, job, message=HUGE[:10_000]))["state"] == "scheduled"
    job = await fetch_one(api, "huge")
    assert job["jid"] == kept
    r = await api.http.post(f"/v1/jobs/{kept}/ack", json={"lease": job["lease"], "result": 1})
    assert r.status_code == 204, r.text
    r = await api.http.post(f"/v1/jobs/{killed}/kill")
    assert r.status_code == 200, r.text

    states = {
        jid: (await api.http.get(f"/v1/jobs/{jid}")).json()["state"]
        for jid in (scheduled, failed, kept, killed)
    }
    assert states == {
        scheduled: "scheduled",
        failed: "scheduled",
        kept: "completed",
        killed: "dead",
    }
    every = {scheduled, failed, kept, killed}
    assert await search(api, "needle") == every
    # The last word lies past the first 65,536 characters.
    assert await search(api, "farend") == set()
    small = await push(api, queue="huge", args=["farend"])
    assert await search(api, "farend") == {small}


async def test_upkeep_expires_such_a_job_and_promotes_the_others(api: InProcess) -> None:
    expiring = await push_huge(api, expires_in=5)
    later = await push(api, queue="other", at=(api.clock.now() + timedelta(seconds=10)).isoformat())
    api.clock.advance(11)
    done = await api.maintain()
    assert (done["expired"], done["promoted"]) == (1, 1)
    for jid, state in ((expiring, "expired"), (later, "available")):
        assert (await api.http.get(f"/v1/jobs/{jid}")).json()["state"] == state


REFUSE_EXPIRY = """
CREATE FUNCTION refuse_expiry() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.queue = 'stuck' AND NEW.state = 'expired' THEN
        RAISE EXCEPTION 'refused';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_expiry BEFORE UPDATE ON werk_jobs
    FOR EACH ROW EXECUTE FUNCTION refuse_expiry();
"""


async def test_a_failing_upkeep_step_leaves_the_others_running(
    make_api: Any, database_url: str
) -> None:
    """A job whose expiry PostgreSQL refuses (a trigger stands in for any row it cannot write)
    stops the expiry step, not the promotion of a job in another queue in the same pass."""
    api: InProcess = await make_api(maintenance_interval=0.05)
    stuck = await push(api, queue="stuck", expires_in=1)
    later = await push(api, queue="other", at=(api.clock.now() + timedelta(seconds=2)).isoformat())
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(REFUSE_EXPIRY)
    finally:
        await conn.close()
    api.clock.advance(3)
    api.services.maintenance.start()
    for _ in range(100):
        got = (await api.http.get(f"/v1/jobs/{later}")).json()["state"]
        if got == "available":
            break
        await asyncio.sleep(0.05)
    assert got == "available"
    assert (await api.http.get(f"/v1/jobs/{stuck}")).json()["state"] == "available"
