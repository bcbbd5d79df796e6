"""Every way a job settles, is deleted or comes back tells its dependents and its batch.

No trigger on werk_jobs does it (one would cost every claim and ack): each statement that can
settle a job, delete one, or bring a finished one back writes the jobs with dependents or
dependencies it changed into werk_job_changes (0016_note_settlings.sql). The first test keeps
the list of such statements honest: a statement that writes werk_jobs either notes its changes
or is named here with why it cannot settle anything. The others drive each path over a job that
is a batch member, depends on a completed job and has a dependent, and check that nothing is
left waiting on it, its edges go with it, and its batch counts it as it stands."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import sql

SQL_DIR = Path(__file__).resolve().parents[2] / "server" / "werk" / "db" / "sql"
WRITES_JOBS = re.compile(r"\b(update|delete\s+from)\s+werk_(completed_)?jobs\b", re.IGNORECASE)

# Statements that write werk_jobs (or werk_completed_jobs) but never settle, delete or un-finish
# a job: each moves jobs only among scheduled, available and active (a batch member stays
# pending, a dependency stays unsettled), or writes no state at all.
CANNOT_SETTLE = {
    "job_fetch": "available -> active",
    "job_unclaim": "active -> available",
    "job_promote": "scheduled -> available",
    "job_extend": "the lease and progress only",
    "job_push": "unique keys given up, a holder's args replaced (scheduled <-> available)",
    "job_push_deps": "marks dependencies as depended on",
}
# Functions in the database that write werk_jobs without noting, and why that is right.
FUNCTIONS_THAT_CANNOT_SETTLE = {
    "werk.push_many": "unique keys given up, a holder's args replaced (scheduled <-> available)",
    "werk_attempt.ack": "called only by werk.ack, which notes what it did",
    "werk_attempt.fail": "called only by werk.fail, which notes what it did",
}


# The statements that fail attempts take their noting from shared files, through a marker.
NOTED_BY = {"noted": "job_failed_noted", "discarded": "job_discard"}


def notes(text: str) -> bool:
    """Whether a statement writes werk_job_changes itself, or holds a marker of a shared file
    that does."""
    return "werk_job_changes" in text or any(
        f"/*{marker}*/" in text and notes((SQL_DIR / f"{name}.sql").read_text())
        for marker, name in NOTED_BY.items()
    )


def test_every_statement_that_writes_jobs_notes_its_changes_or_cannot_settle():
    writers = {f.stem for f in SQL_DIR.glob("*.sql") if WRITES_JOBS.search(f.read_text())}
    noting = {f.stem for f in SQL_DIR.glob("*.sql") if notes(f.read_text())}
    assert writers, "no statement found: the pattern is wrong"
    assert sorted(writers - noting - CANNOT_SETTLE.keys()) == []
    assert sorted(CANNOT_SETTLE.keys() - writers) == [], "listed but writes no job any more"
    assert sorted(CANNOT_SETTLE.keys() & noting) == [], "listed but notes: take it off the list"


async def test_every_function_that_writes_jobs_notes_its_changes_or_cannot_settle(database_url):
    rows = await sql(
        database_url,
        """SELECT p.pronamespace::regnamespace::text || '.' || p.proname AS name, p.prosrc
           FROM pg_proc p
           WHERE p.pronamespace::regnamespace::text IN ('public', 'werk', 'werk_attempt')""",
    )
    writers = {r["name"].removeprefix("public.") for r in rows if WRITES_JOBS.search(r["prosrc"])}
    noting = {r["name"].removeprefix("public.") for r in rows if "werk_job_changes" in r["prosrc"]}
    assert "werk_dependencies_settle" in writers
    assert sorted(writers - noting - FUNCTIONS_THAT_CANNOT_SETTLE.keys()) == []
    # No row trigger on werk_jobs: the cost this design avoids.
    triggers = await sql(
        database_url,
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'werk_jobs'::regclass AND NOT tgisinternal",
    )
    assert [t["tgname"] for t in triggers] == []


async def push(api, **job):
    job.setdefault("jobtype", "t")
    r = await api.http.post("/v1/jobs", json=job)
    assert r.status_code == 201, r.text
    return r.json()


async def fetch(api, queue):
    r = await api.http.post("/v1/fetch", json={"queues": [queue], "wid": "w1", "count": 10})
    assert r.status_code == 200, r.text
    return r.json()["jobs"]


async def fetch_one(api, queue):
    (job,) = await fetch(api, queue)
    return job


async def job_state(api, jid):
    r = await api.http.get(f"/v1/jobs/{jid}")
    return r.json()["state"] if r.status_code == 200 else None


async def act(api, jid, action):
    if action == "delete":
        r = await api.http.delete(f"/v1/jobs/{jid}")
    else:
        r = await api.http.post(f"/v1/jobs/{jid}/{action}")
    assert r.status_code in (200, 204), r.text


async def fail(api, job, **body):
    r = await api.http.post(
        f"/v1/jobs/{job['jid']}/fail",
        json={"lease": job["lease"], "errtype": "E", "message": "m", **body},
    )
    assert r.status_code == 200, r.text


# Each path: the push options of the job X it acts on, what it does to X (in queue q, where X is
# available), and what X is afterwards (None: deleted; "pending+": deleted after it completed).
Path_ = Callable[[Any, str, str, str], Awaitable[None]]


async def ack_one(api, url, q, jid):
    job = await fetch_one(api, q)
    r = await api.http.post(f"/v1/jobs/{jid}/ack", json={"lease": job["lease"], "result": 7})
    assert r.status_code == 204, r.text


async def ack_batch(api, url, q, jid):
    job = await fetch_one(api, q)
    r = await api.http.post("/v1/ack", json={"acks": [{"jid": jid, "lease": job["lease"]}]})
    assert r.status_code == 200 and r.json()["lease_lost"] == [], r.text


async def fail_dead(api, url, q, jid):
    await fail(api, await fetch_one(api, q), retry=False)


async def fail_retried(api, url, q, jid):
    await fail(api, await fetch_one(api, q))


async def fail_discarded(api, url, q, jid):
    await fail(api, await fetch_one(api, q))  # pushed with retry 0: no dead set


async def lease_expired(api, url, q, jid):
    await fetch_one(api, q)
    api.clock.advance(120)
    await api.maintain()


async def expired(api, url, q, jid):
    api.clock.advance(120)
    await api.maintain()


def operator(action: str) -> Path_:
    async def run(api, url, q, jid):
        await act(api, jid, action)

    return run


async def retried_after_death(api, url, q, jid):
    await fail(api, await fetch_one(api, q), retry=False)
    await act(api, jid, "retry")


async def queue_cleared(api, url, q, jid):
    r = await api.http.delete(f"/v1/queues/{q}/jobs")
    assert r.status_code == 200, r.text


async def sql_ack(api, url, q, jid):
    job = await fetch_one(api, q)
    assert (await sql(url, "SELECT werk.ack($1, $2, '7')", jid, job["lease"]))[0][0] is True


async def sql_fail(api, url, q, jid):
    job = await fetch_one(api, q)
    got = await sql(url, """SELECT werk.fail($1, $2, '{"retry": false}')""", jid, job["lease"])
    assert got[0][0] == "dead"


async def pruned_after_ack(api, url, q, jid):
    await ack_one(api, url, q, jid)
    api.clock.advance(400 * 86400)
    await api.maintain()


PATHS: dict[str, tuple[dict[str, Any], Path_, str | None]] = {
    "ack": ({}, ack_one, "completed"),
    "batch ack": ({}, ack_batch, "completed"),
    "fail, dead": ({}, fail_dead, "dead"),
    "fail, retried": ({}, fail_retried, "scheduled"),
    "fail, discarded": ({"retry": 0}, fail_discarded, None),
    "lease expired": ({"retry": -1, "reserve_for": 60}, lease_expired, "dead"),
    "expired": ({"expires_in": 60}, expired, "expired"),
    "kill": ({}, operator("kill"), "dead"),
    "cancel": ({}, operator("cancel"), "cancelled"),
    "delete": ({}, operator("delete"), None),
    "retry after death": ({}, retried_after_death, "available"),
    "queue cleared": ({}, queue_cleared, None),
    "sql ack": ({}, sql_ack, "completed"),
    "sql fail": ({}, sql_fail, "dead"),
    "pruned after ack": ({}, pruned_after_ack, "pruned"),
}


@pytest.mark.parametrize("path", PATHS)
async def test_each_path_settles_dependents_and_batch(api, database_url, path):
    options, run, after = PATHS[path]
    q = "paths-" + re.sub(r"\W+", "-", path)
    r = await api.http.post("/v1/batches", json={})
    assert r.status_code == 201, r.text
    bid = r.json()["bid"]
    await push(api, jid=f"{q}-before", queue="paths-before")
    await push(api, jid=f"{q}-x", queue=q, batch=bid, depends_on=[f"{q}-before"], **options)
    await push(api, jid=f"{q}-after", queue="paths-after", depends_on=[f"{q}-x"])
    before = await fetch_one(api, "paths-before")
    r = await api.http.post(
        f"/v1/jobs/{before['jid']}/ack", json={"lease": before["lease"], "result": "before"}
    )
    assert r.status_code == 204, r.text
    assert await job_state(api, f"{q}-x") == "available"

    await run(api, database_url, q, f"{q}-x")

    pending = after in ("scheduled", "available")
    x = await job_state(api, f"{q}-x")
    assert x == (None if after in (None, "pruned") else after)
    # Its dependent: released when it completed, finished when it ended otherwise, waiting
    # while it is pending (a retry after its death brings back nothing already settled).
    dependent = await job_state(api, f"{q}-after")
    if after in ("completed", "pruned"):
        assert dependent == "available"
    elif path == "retry after death" or not pending:
        assert dependent == "dead"
    else:
        assert dependent == "waiting"
    # Its own edges go with it.
    edges = await sql(database_url, "SELECT count(*) FROM werk_job_deps WHERE jid = $1", f"{q}-x")
    assert edges[0][0] == (0 if x is None else 1)
    # So does its count on the result of its dependency, stored once (werk_dep_results), and
    # the row with its last edge.
    refs = await sql(
        database_url, "SELECT refs FROM werk_dep_results WHERE dep = $1", f"{q}-before"
    )
    assert [r[0] for r in refs] == ([] if x is None else [1])
    # Its batch counts it as it stands (deleted unsettled: dead).
    got = (await api.http.get(f"/v1/batches/{bid}")).json()
    counts = (got["total"], got["pending"], got["succeeded"], got["dead"])
    if pending:
        assert counts == (1, 1, 0, 0)
    elif after in ("completed", "pruned"):
        assert counts == (1, 0, 1, 0)
    else:
        assert counts == (1, 0, 0, 1)
    assert (await sql(database_url, "SELECT count(*) FROM werk_settlings"))[0][0] == 0
    if dependent == "available":
        # The dependent, deleted at its ack, takes its edge with it.
        await ack_one(api, database_url, "paths-after", f"{q}-after")
        edges = await sql(
            database_url, "SELECT count(*) FROM werk_job_deps WHERE jid = $1", f"{q}-after"
        )
        assert edges[0][0] == 0


async def test_a_push_joining_several_batches_counts_each(api):
    bids = []
    for _ in range(3):
        r = await api.http.post("/v1/batches", json={})
        bids.append(r.json()["bid"])
    jobs = [{"jobtype": "t", "batch": b} for b in reversed(bids) for _ in range(2)]
    r = await api.http.post("/v1/jobs/batch", json={"jobs": jobs})
    assert r.status_code == 201, r.text
    for b in bids:
        assert (await api.http.get(f"/v1/batches/{b}")).json()["total"] == 2
