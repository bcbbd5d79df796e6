"""The search index over available jobs (WERK_SEARCH_AVAILABLE): the job list and the bulk
actions read the available jobs through it once it is valid, and walk them otherwise, with the
same answers; one session builds it at a time; one left invalid by a build that stopped is not
read, and is built again by the next ensure."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import asyncpg
import pytest
from asyncpg.transaction import Transaction

from tests.conftest import InProcess
from tests.integration.admin.support import dead_job, fetch_one, push, retrying_job
from tests.integration.test_admin_plan import plans
from tests.support.helpers import assert_reads_at_most
from werk.cli import main
from werk.db import admin_queries
from werk.db import search_index as index_state
from werk.db.admin_queries import JobFilter
from werk.db.pool import connect
from werk.services import search_index

# (params of GET /v1/jobs, the jobs it must list): words of args and custom, with and without
# the queue and state filters, both orders.
QUERIES: list[dict[str, str]] = [
    {"q": "invoice-4711"},
    {"q": "north"},
    {"q": "acme"},
    {"q": "acme", "order": "oldest"},
    {"q": "invoice", "queue": "billing"},
    {"q": "invoice", "state": "available"},
    {"q": "invoice-4711", "state": "available", "queue": "billing"},
    {"q": "invoice", "state": "dead"},
    {"q": "south", "queue": "mail"},
    {"q": "nothing-like-this"},
]
READ = re.compile(r"Bitmap Index Scan on werk_jobs_available_words_idx \(actual rows=\d+ loops=1\)")


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    c = await connect(database_url)
    try:
        yield c
    finally:
        await c.close()


# Available jobs none of the searches match, in the searched queues: enough for PostgreSQL to
# plan as for a backlog.
FILLER = """
    INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
    SELECT 'filler-' || g, 'Report', CASE WHEN g % 2 = 0 THEN 'billing' ELSE 'mail' END,
           jsonb_build_array('order-' || g, g), 'available', now(), now(), now()
    FROM generate_series(1, 5000) AS g
"""


async def jobs(api: InProcess, conn: asyncpg.Connection) -> dict[str, str]:
    """Jobs with words to find, among the filler."""
    dead = await dead_job(api, queue="mail", args=["invoice-4711"])
    await conn.execute(FILLER)
    await conn.execute("ANALYZE werk_jobs")
    return {
        "dead": dead,
        "acme": await push(
            api, queue="billing", args=["invoice-4711", {"customer": "Acme"}],
            custom={"tenant": "north"},
        ),
        "globex": await push(api, queue="billing", args=["invoice-4712"], custom={"t": "south"}),
        "mail": await push(api, queue="mail", args=[{"to": "acme@example.com", "n": 7}]),
    }  # fmt: skip


async def answers(api: InProcess) -> list[set[str]]:
    found = []
    for params in QUERIES:
        r = await api.http.get("/v1/jobs", params=params)
        assert r.status_code == 200, r.text
        found.append({j["jid"] for j in r.json()["jobs"]})
    return found


async def list_plans(conn: asyncpg.Connection, q: str, queue: str = "NULL") -> list[str]:
    """The custom and generic plans of the list of available jobs for q (the last in line
    first, no other filter)."""
    return await plans(
        conn, "behind", "NULL", queue, "NULL", f"'{q}'", "NULL", "NULL", "NULL", "51"
    )


async def test_the_list_reads_available_jobs_through_the_index_once_it_is_valid(
    api: InProcess, conn: asyncpg.Connection
) -> None:
    assert await index_state.state(conn) is None  # the setting off: no index, pushes pay nothing
    pushed = await jobs(api, conn)
    walked = await answers(api)
    assert walked[0] == {pushed["acme"], pushed["dead"]}
    assert walked[1] == {pushed["acme"]}  # a word of custom
    assert walked[2] == {pushed["acme"], pushed["mail"]}
    assert walked[6] == {pushed["acme"]}
    assert walked[8] == set() and walked[9] == set()
    for plan in await list_plans(conn, "invoice-4711"):
        assert "on werk_jobs_available_words_idx" not in plan

    assert await search_index.ensure(conn) == "built"
    assert await index_state.state(conn) is True
    assert await answers(api) == walked
    for plan in [*await list_plans(conn, "invoice-4711"), *await list_plans(conn, "n", "'mail'")]:
        assert READ.search(plan), plan
    assert await search_index.ensure(conn) == "present"

    assert await search_index.drop(conn) == "dropped"
    assert await search_index.drop(conn) == "absent"
    assert await answers(api) == walked


# (the action, its filters): each over words of available jobs and of others.
BULK: list[tuple[str, JobFilter]] = [
    ("kill", JobFilter(words="invoice")),
    ("cancel", JobFilter(words="invoice", queue="billing")),
    ("cancel", JobFilter(words="acme", state="available")),
    ("delete", JobFilter(words="invoice-4711")),
    ("delete", JobFilter(words="invoice", jobtype="Report", failed=False)),
    ("retry", JobFilter(words="invoice")),
    ("kill", JobFilter(words="north", queue="mail")),
    ("kill", JobFilter(words="nothing-like-this")),
]


async def bulk_jobs(api: InProcess, conn: asyncpg.Connection) -> dict[str, str]:
    """The jobs of ``jobs`` and, before the filler, an active and a retrying job with words,
    then more available ones, a second apart, so that a bound takes the oldest."""
    active = await push(api, queue="busy", args=["invoice-4713"])
    assert (await fetch_one(api, "busy"))["jid"] == active
    retrying = await retrying_job(api, queue="later", args=["invoice-4714"])
    pushed = await jobs(api, conn)
    for n in range(4):
        api.clock.advance(1)
        pushed[f"more-{n}"] = await push(
            api, queue=("billing", "mail")[n % 2], args=[f"invoice-{n}"]
        )
    return pushed | {"active": active, "retrying": retrying}


async def acted(conn: asyncpg.Connection, limit: int) -> list[set[str]]:
    """The jobs each of BULK changes, at most ``limit`` (each rolled back)."""
    done = []
    for action, where in BULK:
        undo = conn.transaction()
        await undo.start()
        try:
            rows = await admin_queries.act_on_jobs(
                conn, action, None, where, jids=None, limit=limit
            )
        finally:
            await undo.rollback()
        done.append({r["jid"] for r in rows})
    return done


async def act_plans(conn: asyncpg.Connection, action: str, q: str) -> list[str]:
    """The custom and generic plans of a bulk action over the jobs matching q."""
    return await plans(
        conn, "admin_job_act", "NULL", "NULL", "NULL", f"'{q}'", "NULL", "NULL", "1000", "NULL",
        f"'{action}'",
    )  # fmt: skip


async def test_bulk_actions_read_available_jobs_through_the_index_once_it_is_valid(
    api: InProcess, conn: asyncpg.Connection
) -> None:
    pushed = await bulk_jobs(api, conn)
    walked = [await acted(conn, limit) for limit in (1000, 2)]
    every = walked[0]
    assert every[0] == {
        pushed[k] for k in ("acme", "globex", "active", "retrying", "more-0", "more-1", "more-2",
                            "more-3")
    }  # fmt: skip
    assert every[1] == {pushed[k] for k in ("acme", "globex", "more-0", "more-2")}
    assert every[2] == {pushed["acme"], pushed["mail"]}
    assert every[3] == {pushed["acme"], pushed["dead"]}
    assert every[5] == {pushed["dead"], pushed["retrying"]}
    assert every[6] == set() and every[7] == set()
    assert walked[1][0] == {pushed["active"], pushed["retrying"]}  # the oldest two
    for action in ("kill", "cancel", "delete"):
        for plan in await act_plans(conn, action, "invoice"):
            assert "on werk_jobs_available_words_idx" not in plan

    assert await search_index.ensure(conn) == "built"
    assert [await acted(conn, limit) for limit in (1000, 2)] == walked
    for action in ("kill", "cancel", "delete"):
        custom, generic = await act_plans(conn, action, "invoice")
        assert READ.search(custom), custom
        assert READ.search(generic), generic
        # the matching jobs only, not the available backlog: the active ones are walked
        assert_reads_at_most(custom, 50)

    await search_index.drop(conn)
    assert [await acted(conn, limit) for limit in (1000, 2)] == walked


async def held_build(
    conn: asyncpg.Connection, writer: asyncpg.Connection, build: Coroutine[Any, Any, Any]
) -> tuple[Transaction, asyncio.Task[Any]]:
    """Start ``build`` while ``writer``'s open transaction holds it after its first step
    (CONCURRENTLY waits for the table's writers): the index is there, invalid, until the
    transaction ends. Returns that transaction and the build."""
    held = writer.transaction()
    await held.start()
    await writer.execute("LOCK TABLE werk_jobs IN ROW EXCLUSIVE MODE")
    building = asyncio.create_task(build)
    for _ in range(200):
        if await index_state.state(conn) is False:
            break
        await asyncio.sleep(0.02)
    assert await index_state.state(conn) is False
    return held, building


async def test_an_invalid_index_is_not_read_and_is_built_again(
    api: InProcess, conn: asyncpg.Connection, database_url: str
) -> None:
    await bulk_jobs(api, conn)
    walked = await answers(api)
    bulk = await acted(conn, 1000)
    # A writer's open transaction holds the build after its first step (CONCURRENTLY waits for
    # the writers of the table): the index is there, invalid, and its builder holds the lock.
    writer = await connect(database_url)
    builder = await connect(database_url)
    try:
        held, building = await held_build(conn, writer, search_index.ensure(builder))
        assert await search_index.ensure(conn) == "busy"  # one session builds at a time
        assert await search_index.drop(conn) == "busy"
        assert await answers(api) == walked
        # The build stops (as when its node goes away): the index is left invalid.
        await conn.execute("SELECT pg_cancel_backend($1)", builder.get_server_pid())
        with pytest.raises(asyncpg.QueryCanceledError):
            await building
        await held.rollback()
    finally:
        await writer.close()
        await builder.close()
    assert await index_state.state(conn) is False
    assert await answers(api) == walked
    assert await acted(conn, 1000) == bulk
    for plan in [*await list_plans(conn, "invoice-4711"), *await act_plans(conn, "kill", "acme")]:
        assert not READ.search(plan), plan

    assert await search_index.ensure(conn) == "rebuilt"
    assert await index_state.state(conn) is True
    assert await answers(api) == walked
    assert await acted(conn, 1000) == bulk
    assert await count_indexes(conn) == 1


async def count_indexes(conn: asyncpg.Connection) -> int:
    n: int = await conn.fetchval(
        "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'werk_jobs_available_words%'"
    )
    return n


async def test_concurrent_ensures_build_one_index(
    make_api: Callable[..., Any], database_url: str, conn: asyncpg.Connection
) -> None:
    others = [await connect(database_url) for _ in range(3)]
    try:
        done = await asyncio.gather(*(search_index.ensure(c) for c in others))
    finally:
        for c in others:
            await c.close()
    assert sorted(done).count("built") == 1, done
    assert set(done) <= {"built", "busy", "present"}
    assert await count_indexes(conn) == 1 and await index_state.state(conn) is True

    # Two apps started with the setting, one right after the other (in this process): each
    # starts its build in the background, the one holding the lock builds, the other finds it busy.
    await search_index.drop(conn)
    for _ in range(2):
        await make_api(search_available=True)
    await until_valid(conn)
    assert await count_indexes(conn) == 1


async def until_valid(conn: asyncpg.Connection) -> None:
    for _ in range(200):
        if await index_state.state(conn):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the search index over available jobs was not built")


async def test_the_running_nodes_build_a_dropped_or_invalid_index_again(
    make_api: Callable[..., Any], database_url: str, conn: asyncpg.Connection
) -> None:
    """Two nodes with the setting, their upkeep running (in this process, checking often): the
    index dropped, or left invalid by a build that stopped, is built again, once, without a
    restart; while another session holds the builders' lock, the nodes leave it alone."""
    for _ in range(2):
        node: InProcess = await make_api(
            search_available=True, search_index_check_interval=0.1, maintenance_interval=0.05
        )
        node.services.maintenance.start()
    await until_valid(conn)

    await index_state.drop(conn)
    await until_valid(conn)
    assert await count_indexes(conn) == 1

    holder, writer, builder = [await connect(database_url) for _ in range(3)]
    try:
        assert await index_state.try_lock(holder)
        await index_state.drop(conn)
        # A build held by a writer's open transaction, then cancelled: the index is left invalid.
        held, building = await held_build(conn, writer, index_state.create(builder))
        await conn.execute("SELECT pg_cancel_backend($1)", builder.get_server_pid())
        with pytest.raises(asyncpg.QueryCanceledError):
            await building
        await held.rollback()
        await asyncio.sleep(0.5)  # the nodes look, several times, and find the lock held
        assert await index_state.state(conn) is False
        await index_state.unlock(holder)
        await until_valid(conn)
    finally:
        for c in (holder, writer, builder):
            await c.close()
    assert await count_indexes(conn) == 1


def test_the_command_builds_the_index_and_drops_it(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, said in (
        ([], "built"),
        ([], "present"),
        (["--drop"], "dropped"),
        (["--drop"], "absent"),
    ):
        main(["search-index", "--database-url", database_url, *argv])
        assert capsys.readouterr().out == f"werk_jobs_available_words_idx: {said}\n"
