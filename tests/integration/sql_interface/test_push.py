"""werk.push and werk.push_many store what HTTP's push stores for the same body (defaults,
limits, times, expiry, unique keys and their holders, counters), refuse what it refuses
(SQLSTATE 22023, "invalid_request:", nothing stored), and answer with the jids HTTP answers."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from tests.support.helpers import count_jobs, sql

# Columns a push decides from the body (jid, seq and the times at which each path ran are
# compared apart, as offsets from the job's own push).
COMPARED = (
    "jobtype, queue, args, priority, reserve_for, retry, backtrace, custom, at, state, attempt, "
    "keep_result_for, unique_key, unique_spec, created_at, enqueued_at, run_at, expires_at, "
    "unique_until"
)

# Nested as deep as the server takes (args itself is the first level), and one level deeper.
DEEPEST_ALLOWED: Any = 1
for _ in range(62):
    DEEPEST_ALLOWED = [DEEPEST_ALLOWED]

SAME = [
    {"jobtype": "a"},
    {
        "jobtype": "a",
        "args": [1, "x", {"k": [1.5, None]}],
        "queue": "critical",
        "priority": 5,
        "reserve_for": 120,
        "retry": 3,
        "backtrace": 10,
        "custom": {"t": 1},
    },
    {"jobtype": "a", "jid": "explicit-jid-1", "priority": 7.0, "retry": -1},
    {"jobtype": "a", "at": "2035-01-02T03:04:05Z"},
    {"jobtype": "a", "at": "2001-01-01T00:00:00+02:00"},
    {"jobtype": "a", "at": "2030-01-01T00:00:00.5+16:00"},  # past PostgreSQL's own offsets
    {"jobtype": "a", "at": "2030-06-01T12:00:00-23:59"},
    {"jobtype": "a", "at": "9999-12-31T23:59:59+23:00"},
    {"jobtype": "a", "expires_in": 300},
    {"jobtype": "a", "at": "2035-01-01T00:00:00Z", "expires_in": 60.5},
    {"jobtype": "a", "expires_at": "2035-01-01T00:00:00.25+01:00"},
    {"jobtype": "a", "keep_result_for": 3600, "queue": None, "custom": None},
    {"jobtype": "a", "args": [600.0, {"b": [2], "a": 1.0}], "unique": {}},
    {"jobtype": "a", "args": [0.1, -2.5, 1e-3, 'ü\n"', {"z": 1, "a": {"y": 2}}], "unique": {}},
    {
        "jobtype": "a",
        "args": [{"user": 7}],
        "custom": {"tenant": "x"},
        "unique": {
            "by": ["args.0.user", "custom.tenant", "custom.missing"],
            "for": 3600,
            "until": "start",
            "on_conflict": "replace",
        },
    },
    {"jobtype": "a", "unique": {"key": "nightly", "on_conflict": "existing", "for": None}},
    {"jobtype": "a", "at": "2035-01-01T00:00:00Z", "unique": {"for": 10}},
    {"jobtype": "a", "args": [DEEPEST_ALLOWED]},
    {"jobtype": "a", "queue": ".a"},
    {"jobtype": "a", "queue": "..a"},
    {"jobtype": "a", "queue": "..."},
]

too_deep: Any = 1
for _ in range(63):
    too_deep = [too_deep]

REFUSED = [
    {"jobtype": ""},
    {"jobtype": "a", "queue": "bad queue"},
    {"jobtype": "a", "queue": 7},
    {"jobtype": "a", "queue": "."},  # a dot segment in /v1/queues/{queue}/...
    {"jobtype": "a", "queue": ".."},
    {"jobtype": "a", "priority": 1001},
    {"jobtype": "a", "priority": "1"},
    {"jobtype": "a", "priority": 1.5},
    {"jobtype": "a", "priority": True},
    {"jobtype": "a", "reserve_for": 59},
    {"jobtype": "a", "retry": -2},
    {"jobtype": "a", "backtrace": 1001},
    {"jobtype": "a", "args": {"a": 1}},
    {"jobtype": "a", "custom": []},
    {"jobtype": "a", "jid": "short"},
    {"jobtype": "a", "jid": "../../etc/passwd"},
    {"jobtype": "a", "at": "2030-01-01T00:00:00"},
    {"jobtype": "a", "at": 12},
    {"jobtype": "a", "at": "10000-01-01T00:00:00Z"},
    {"jobtype": "a", "at": "2030-12-31T23:59:60Z"},
    {"jobtype": "a", "at": "2030-01-01T24:00:00Z"},
    {"jobtype": "a", "at": "2030-01-01T00:00:00+24:00"},
    {"jobtype": "a", "at": "2030-02-30T00:00:00Z"},
    {"jobtype": "a", "at": "0001-01-01T00:00:00+01:00"},
    {"jobtype": "a", "expires_in": 0},
    {"jobtype": "a", "expires_in": 5, "expires_at": "2030-01-01T00:00:00Z"},
    {"jobtype": "a", "keep_result_for": -1},
    {"jobtype": "a", "unique": {"key": "k", "by": ["args.0"]}},
    {"jobtype": "a", "unique": {"on_conflict": "maybe"}},
    {"jobtype": "a", "unique": {"by": ["nope.0"]}},
    {"jobtype": "a", "unique": {"for": -1}},
    {"jobtype": "a", "unique": {"colour": 1}},
    {"jobtype": "a", "unique": []},
    {"jobtype": "a", "args": [9223372036854775808]},
    {"jobtype": "a", "args": [too_deep]},
    {"jobtype": "a", "colour": "red"},
]


async def sql_push(conn: asyncpg.Connection, body: dict[str, Any]) -> str:
    opts = {k: v for k, v in body.items() if k not in ("jobtype", "args")}
    jid: str = await conn.fetchval(
        "SELECT werk.push($1, $2::jsonb, $3::jsonb)",
        body["jobtype"],
        json.dumps(body.get("args", [])),
        json.dumps(opts),
    )
    return jid


def offsets(row: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The row with its times as offsets from the push (from `at`, for a job due later), except
    the ones the body named."""
    stored = dict(row)
    created: datetime = stored.pop("created_at")
    base = max(stored["at"], created) if stored["at"] else created
    stored["enqueued_at"] = stored["enqueued_at"] and stored["enqueued_at"] - created
    for name in ("run_at", "unique_until") + (() if "expires_at" in body else ("expires_at",)):
        stored[name] = stored[name] and stored[name] - base
    return stored


async def pushed_total(database_url: str) -> int:
    rows = await sql(database_url, "SELECT coalesce(sum(pushed), 0)::int AS n FROM werk_counters")
    return int(rows[0]["n"])


@pytest.mark.parametrize("body", SAME, ids=range(len(SAME)))
async def test_a_job_is_stored_as_http_stores_it(api, database_url, body):
    r = await api.http.post("/v1/jobs", json=body)
    assert r.status_code == 201, r.text
    query = f"SELECT {COMPARED} FROM werk_jobs WHERE jid = $1"
    (over_http,) = await sql(database_url, query, r.json()["jid"])
    await sql(database_url, "DELETE FROM werk_jobs")
    conn = await asyncpg.connect(database_url)
    try:
        jid = await sql_push(conn, body)
        if "jid" in body:
            assert jid == body["jid"]
        else:  # made as domain/jids.py makes them: ordered by time
            assert len(jid) == 28 and int(jid, 16) >> 68 > 0
            assert abs((int(jid, 16) >> 68) - (int(r.json()["jid"], 16) >> 68)) < 600_000
        (over_sql,) = await sql(database_url, query, jid)
    finally:
        await conn.close()
    assert offsets(over_sql, body) == offsets(over_http, body)
    assert await pushed_total(database_url) == 2


@pytest.mark.parametrize("body", REFUSED, ids=range(len(REFUSED)))
async def test_what_http_refuses_is_refused_and_nothing_is_stored(api, database_url, body):
    r = await api.http.post("/v1/jobs", json=body)
    assert r.status_code == 422 and r.json()["code"] == "invalid_request", r.text
    conn = await asyncpg.connect(database_url)
    try:
        with pytest.raises(asyncpg.InvalidParameterValueError) as raised:
            await sql_push(conn, body)
    finally:
        await conn.close()
    assert raised.value.sqlstate == "22023"
    assert raised.value.message.startswith("invalid_request: ")
    assert await count_jobs(database_url) == 0
    assert await pushed_total(database_url) == 0


async def test_an_error_names_the_field(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        with pytest.raises(asyncpg.InvalidParameterValueError) as raised:
            await conn.fetchval(
                "SELECT werk.push_many($1::jsonb)",
                json.dumps([{"jobtype": "a"}, {"jobtype": "a", "priority": 5000}]),
            )
        assert raised.value.message == (
            "invalid_request: jobs.1.priority must be an integer between -1000 and 1000"
        )
        assert raised.value.detail == "jobs.1.priority"
        with pytest.raises(asyncpg.InvalidParameterValueError, match=r"argument of werk\.push"):
            await conn.fetchval("""SELECT werk.push('a', '[]', '{"args": [1]}')""")
    finally:
        await conn.close()


async def test_an_existing_jid_is_answered_and_stored_once(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        opts = json.dumps({"jid": "order-12345"})
        first = await conn.fetchval("SELECT werk.push('a', '[1]', $1::jsonb)", opts)
        again = await conn.fetchval("SELECT werk.push('b', '[2]', $1::jsonb)", opts)
    finally:
        await conn.close()
    assert first == again == "order-12345"
    rows = await sql(database_url, "SELECT jobtype, args FROM werk_jobs")
    assert [(r["jobtype"], json.loads(r["args"])) for r in rows] == [("a", [1])]
    assert await pushed_total(database_url) == 1


async def test_replace_gives_the_holder_the_push_s_expiry_as_http_does(database_url):
    conn = await asyncpg.connect(database_url)
    try:
        opts = {"unique": {"key": "sql-debounce", "on_conflict": "replace"}}
        first = await conn.fetchval(
            "SELECT werk.push('r', '[]', $1)",
            json.dumps({**opts, "at": "2035-01-01T00:00:00Z", "expires_in": 60}),
        )
        moved = json.dumps({**opts, "at": "2036-01-01T00:00:00Z"})
        assert await conn.fetchval("SELECT werk.push('r', '[]', $1)", moved) == first
        assert await conn.fetchval("SELECT expires_at FROM werk_jobs") is None
        moved = json.dumps({**opts, "at": "2036-01-01T00:00:00Z", "expires_in": 30})
        assert await conn.fetchval("SELECT werk.push('r', '[]', $1)", moved) == first
        expires = await conn.fetchval("SELECT expires_at FROM werk_jobs")
        assert expires == datetime.fromisoformat("2036-01-01T00:00:30+00:00")
    finally:
        await conn.close()


async def test_unique_holders_as_http_meets_them(api, database_url):
    holder = (await api.http.post("/v1/jobs", json={"jobtype": "r", "unique": {}})).json()
    conn = await asyncpg.connect(database_url)
    try:
        with pytest.raises(asyncpg.UniqueViolationError) as raised:
            await conn.fetchval("SELECT werk.push('r', '[]', '{\"unique\": {}}')")
        assert raised.value.message.startswith(f"not_unique: job {holder['jid']} holds")
        assert raised.value.detail == holder["jid"]
        existing = json.dumps({"unique": {"on_conflict": "existing"}})
        assert await conn.fetchval("SELECT werk.push('r', '[]', $1)", existing) == holder["jid"]
        replace = json.dumps({"unique": {"on_conflict": "replace"}})
        assert await conn.fetchval("SELECT werk.push('r', '[]', $1)", replace) == holder["jid"]
        # An active holder keeps running; the replacing job is stored beside it.
        fetched = await api.http.post("/v1/fetch", json={"queues": ["default"], "wid": "w1"})
        assert [j["jid"] for j in fetched.json()["jobs"]] == [holder["jid"]]
        stored = await conn.fetchval("SELECT werk.push('r', '[]', $1)", replace)
        assert stored != holder["jid"]
    finally:
        await conn.close()
    rows = await sql(database_url, "SELECT jid, state, unique_key FROM werk_jobs ORDER BY seq")
    assert [(r["jid"], r["state"], r["unique_key"] is not None) for r in rows] == [
        (holder["jid"], "active", False),
        (stored, "available", True),
    ]
    assert await pushed_total(database_url) == 2


async def test_push_many_answers_in_order_and_refuses_a_jid_twice(api, database_url):
    conn = await asyncpg.connect(database_url)
    try:
        jobs = [{"jobtype": "a", "jid": f"batch-job-{i}"} for i in range(3)]
        jids = await conn.fetch("SELECT * FROM werk.push_many($1::jsonb)", json.dumps(jobs))
        assert [r[0] for r in jids] == ["batch-job-0", "batch-job-1", "batch-job-2"]
        twice = [{"jobtype": "a", "jid": "batch-job-9"}, {"jobtype": "b", "jid": "batch-job-9"}]
        with pytest.raises(asyncpg.InvalidParameterValueError, match=r"jobs\.1\.jid"):
            await conn.fetch("SELECT * FROM werk.push_many($1::jsonb)", json.dumps(twice))
        r = await api.http.post("/v1/jobs/batch", json={"jobs": twice})
        assert r.status_code == 422
        with pytest.raises(asyncpg.InvalidParameterValueError, match="non-empty"):
            await conn.fetch("SELECT * FROM werk.push_many('[]')")
    finally:
        await conn.close()
    assert await count_jobs(database_url) == 3


async def test_metrics_count_jobs_pushed_in_sql(api, database_url):
    conn = await asyncpg.connect(database_url)
    try:
        await conn.fetch(
            "SELECT * FROM werk.push_many($1::jsonb)",
            json.dumps([{"jobtype": "a", "queue": "mail"}] * 3),
        )
    finally:
        await conn.close()
    text = (await api.http.get("/metrics")).text
    assert 'werk_jobs_pushed_total{queue="mail"} 3' in text
