"""Jobs survive restarts (external database and the embedded one); migrations are safe to run
concurrently and refuse a schema newer than the code."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from tests.support.helpers import sql
from tests.support.server import ServerProcess, clean_env
from werk.app import create_app, prepare_database
from werk.db import queries
from werk.db.migrate import available_migrations
from werk.db.pool import connect
from werk.db.sql import sql as sql_file
from werk.errors import SchemaTooNew


def test_restart_keeps_every_job(werk_server_factory):
    first = werk_server_factory()
    jobs = [{"jobtype": "keep", "jid": f"keep-{i:04d}"} for i in range(50)]
    assert httpx.post(first.url + "/v1/jobs/batch", json={"jobs": jobs}).status_code == 201
    first.kill()
    second = werk_server_factory()
    info = httpx.get(second.url + "/v1/info").json()
    assert info["states"] == {"available": 50}


def test_embedded_postgres_keeps_jobs_across_restarts(tmp_path):
    """The README's serve command with no database URL: embedded PostgreSQL in a data dir."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    tmp_path.chmod(0o755)

    def start() -> ServerProcess:
        server = ServerProcess("", tmp_path, env={"WERK_DATA_DIR": str(data_dir)})
        server._env = clean_env({k: v for k, v in server._env.items() if k != "WERK_DATABASE_URL"})
        return server.start(timeout=90)

    server = start()
    try:
        r = httpx.post(server.url + "/v1/jobs", json={"jobtype": "x", "jid": "embedded-1"})
        assert r.status_code == 201
    finally:
        assert server.stop() == 0
    server = start()
    try:
        assert httpx.get(server.url + "/v1/jobs/embedded-1").json()["state"] == "available"
    finally:
        server.stop()
    assert (data_dir / "pgdata" / "PG_VERSION").exists()


async def test_concurrent_migrations_apply_once(test_databases):
    name = f"werk_fresh_{id(test_databases) % 10000}"
    await test_databases.drop(name)
    await sql(test_databases.root_url, f'CREATE DATABASE "{name}"')
    url = test_databases.url(name)
    try:
        await asyncio.gather(*(prepare_database(url) for _ in range(4)))
        rows = await sql(url, "SELECT version FROM werk_schema_migrations ORDER BY version")
        assert [r["version"] for r in rows] == [v for v, _, _ in available_migrations()]
    finally:
        await test_databases.drop(name)


async def test_schema_newer_than_the_code_is_refused(database_url, tmp_path):
    await sql(database_url, "INSERT INTO werk_schema_migrations (version, name) VALUES (9999, 'x')")
    with pytest.raises(SchemaTooNew, match="9999"):
        await prepare_database(database_url)
    env = clean_env({"WERK_DATABASE_URL": database_url, "WERK_PORT": "0"})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "werk.cli",
        "serve",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0
    assert b"newer" in err and b"9999" in err


JOBS_IN_EVERY_STATE = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, custom, priority, state, run_at, created_at,
                       enqueued_at, attempt, lease, lease_expires_at, wid, retry_count, failed_at,
                       errtype, message, finished_at, unique_key, unique_spec, waiting_for,
                       dependencies)
VALUES
    ('upgrade-available', 'resize', 'img', '[1, "a"]', '{"k": 1}', 5, 'available', now(), now(),
     now(), 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    ('upgrade-active', 'resize', 'img', '[2]', '{}', 0, 'active', now(), now(), now(), 1,
     gen_random_uuid(), now() + interval '1 hour', 'w-1', 0, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL),
    ('upgrade-retrying', 'resize', 'img', '[3]', '{}', 0, 'scheduled', now() + interval '1 hour',
     now(), now(), 1, NULL, NULL, NULL, 1, now(), 'IOError', 'disk full', NULL, NULL, NULL, NULL,
     NULL),
    ('upgrade-dead', 'resize', 'img', '[4]', '{}', 0, 'dead', now(), now(), now(), 26, NULL,
     NULL, NULL, 25, now(), 'IOError', 'disk full', now(), NULL, NULL, NULL, NULL),
    ('upgrade-unique', 'resize', 'other', '[6]', '{}', 0, 'available', now(), now(), now(), 0,
     NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, 'k-1', '{"until": "success"}', NULL, NULL),
    ('upgrade-waiting', 'resize', 'other', '[7]', '{}', 0, 'waiting', now(), now(), NULL, 0,
     NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, 1, true);
INSERT INTO werk_completed_jobs (jid, jobtype, queue, args, custom, priority, state, run_at,
                                 created_at, enqueued_at, attempt, wid, finished_at,
                                 keep_result_for, result, keep_until)
VALUES
    ('upgrade-completed', 'resize', 'img', '[5]', '{}', 0, 'completed', now(), now(), now(), 1,
     'w-1', now(), 3600, '{"pages": 2}', now() + interval '1 hour')
"""


async def database_before(test_databases, name: str, version: int, jobs: str) -> str:
    """A new database ``name`` migrated to just before ``version``, holding ``jobs`` (SQL)."""
    await test_databases.drop(name)
    await sql(test_databases.root_url, f'CREATE DATABASE "{name}"')
    url: str = test_databases.url(name)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql_file("migration_table"))
        for number, migration, text in available_migrations():
            if number < version:
                await conn.execute(text)
                await conn.execute(sql_file("migration_record"), number, migration)
        await conn.execute(jobs)
    finally:
        await conn.close()
    return url


async def test_the_latest_migration_keeps_the_jobs_of_a_database_it_upgrades(test_databases):
    """A database at the previous version, holding jobs in every state (completed ones kept in
    werk_completed_jobs), is upgraded at start-up: every job reads back the same and the stored
    jobs can still be claimed and acked."""
    name = f"werk_upgrade_{id(test_databases) % 10000}"
    *_, (latest, _, _) = available_migrations()
    try:
        url = await database_before(test_databases, name, latest, JOBS_IN_EVERY_STATE)
        before = await sql(url, "SELECT * FROM werk_stored_jobs ORDER BY jid")
        await prepare_database(url)
        # Every job, in the table that now holds it (completed ones: werk_completed_jobs).
        after = await sql(url, "SELECT * FROM werk_stored_jobs ORDER BY jid")
        # The columns a migration adds read NULL on the jobs stored before it.
        old = [dict(b) for b in before]
        assert [{k: r[k] for k in b} for r, b in zip(after, old, strict=True)] == old
        assert {v for r in after for k, v in r.items() if k not in old[0]} <= {None}
        kept = await sql(url, "SELECT jid FROM werk_completed_jobs")
        assert [r["jid"] for r in kept] == ["upgrade-completed"]
        conn = await connect(url)
        try:
            claimed = await queries.fetch_jobs(conn, None, ["img"], ["w-2", "w-2"])
            assert [r["jid"] for r in claimed] == ["upgrade-available"]
            acked, kept = await queries.ack_jobs(
                conn, None, {"upgrade-available": claimed[0]["lease"]}, keep_completed=False
            )
            assert (acked, kept) == ({"upgrade-available"}, set())
        finally:
            await conn.close()
    finally:
        await test_databases.drop(name)


WORDY_JOBS = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, finished_at)
VALUES ('wordy-dead', 'resize', 'img', jsonb_build_array(repeat('word ', 20000) || 'farend'),
        'dead', now(), now(), now()),
       ('short-dead', 'resize', 'img', '["farend"]', 'dead', now(), now(), now())
"""


async def test_bounding_the_words_makes_the_index_entries_of_larger_jobs_again(test_databases):
    """Migration 20 bounds a job's words to its first 65,536 characters: a job stored before it
    whose last word lies further on is no longer found by that word, through the index too."""
    name = f"werk_words_{id(test_databases) % 10000}"
    try:
        url = await database_before(test_databases, name, 20, WORDY_JOBS)
        assert await farend(url) == ["short-dead", "wordy-dead"]
        await prepare_database(url)
        assert await farend(url) == ["short-dead"]
    finally:
        await test_databases.drop(name)


async def farend(url: str) -> list[str]:
    """The dead jobs the words index finds by "farend"."""
    query = """
        SELECT array_agg(jid ORDER BY jid) FROM werk_jobs
        WHERE werk_job_words(errtype, message, args, custom) @@ 'farend'::tsquery
          AND state NOT IN ('available', 'active')
    """
    conn = await asyncpg.connect(url)
    reading = conn.transaction()
    await reading.start()
    try:
        # Only a bitmap scan is left, and only the words index can serve it once the other
        # partial indexes over these states are gone (for this transaction).
        await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off")
        others = await conn.fetch(
            "SELECT indexrelid::regclass::text AS name FROM pg_index"
            " WHERE indrelid = 'werk_jobs'::regclass AND indpred IS NOT NULL"
            " AND indexrelid <> 'werk_jobs_words_idx'::regclass"
        )
        for other in others:
            await conn.execute(f'DROP INDEX "{other["name"]}"')
        assert "werk_jobs_words_idx" in "".join(r[0] for r in await conn.fetch("EXPLAIN " + query))
        found: list[str] = await conn.fetchval(query)
        return found
    finally:
        await reading.rollback()
        await conn.close()


OLD_BATCH = """
INSERT INTO werk_batches (bid, created_at, success_jid, death_jid)
VALUES ('b-before-21', now(), 'cb-success-0001', 'cb-death-00001');
INSERT INTO werk_jobs (jid, jobtype, queue, args, custom, state, run_at, created_at, waiting_for,
                       dependents, dependencies)
VALUES ('cb-success-0001', 'ok', 'callbacks', '[]', '{}', 'waiting', now(), now(), 1, true, true),
       ('cb-death-00001', 'bad', 'callbacks', '[]', '{}', 'waiting', now(), now(), 1, true, true);
INSERT INTO werk_job_deps (dep, jid, on_failure)
VALUES ('b-before-21:success', 'cb-success-0001', 'skip'),
       ('b-before-21:death', 'cb-death-00001', 'skip');
"""


async def test_the_callbacks_of_a_batch_opened_before_21_are_released_by_their_batch(
    test_databases,
):
    """Migration 21 renames a batch's callback edges to names no jid can take: the callbacks of a
    batch opened before it still wait on their batch, and its commit releases them."""
    name = f"werk_edges_{id(test_databases) % 10000}"
    try:
        url = await database_before(test_databases, name, 21, OLD_BATCH)
        await prepare_database(url)
        edges = await sql(url, "SELECT dep FROM werk_job_deps ORDER BY dep")
        assert [e["dep"] for e in edges] == ["b-before-21/death", "b-before-21/success"]
        await sql(url, "SELECT werk_batch_move('b-before-21', 0, 0, true, false, now())")
        states = await sql(url, "SELECT jid, state::text FROM werk_jobs ORDER BY jid")
        assert [tuple(s) for s in states] == [
            ("cb-death-00001", "skipped"),
            ("cb-success-0001", "available"),
        ]
    finally:
        await test_databases.drop(name)


RESULTS_ON_EDGES = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, custom, state, run_at, created_at, retry_count,
                       failed_at, errtype, message, finished_at, dependencies)
SELECT 'mig-job-' || d, 't', 'q', '[]', '{}', 'dead', now(), now(), 0, now(), 'E', 'm', now(), true
FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e']) AS d;
INSERT INTO werk_completed_jobs (jid, jobtype, queue, args, custom, priority, state, run_at,
                                 created_at, enqueued_at, attempt, wid, finished_at, result,
                                 keep_until, dependents)
VALUES ('mig-kept', 't', 'q', '[]', '{}', 0, 'completed', now(), now(), now(), 1, 'w-1',
        '2026-01-01 00:00:00+00', '{"v": 1}', now() + interval '1 day', true);
INSERT INTO werk_job_deps (dep, jid, on_failure, outcome, result, settled_at)
VALUES ('mig-kept', 'mig-job-a', 'ignore', 'completed', '{"v": 1}', '2026-01-01 00:00:00+00'),
       ('mig-kept', 'mig-job-b', 'ignore', 'completed', '{"v": 1}', '2026-01-01 00:00:00+00'),
       ('mig-kept', 'mig-job-c', 'ignore', 'completed', '{"v": 1}', '2026-01-02 00:00:00+00'),
       ('mig-gone', 'mig-job-a', 'ignore', 'completed', '"old"', '2025-06-01 00:00:00+00'),
       ('mig-gone', 'mig-job-d', 'ignore', 'completed', '"old"', '2025-06-03 00:00:00+00'),
       ('mig-gone', 'mig-job-e', 'ignore', 'completed', '"older"', '2025-01-01 00:00:00+00'),
       ('mig-numbers', 'mig-job-a', 'ignore', 'completed', '1', '2025-02-01 00:00:00+00'),
       ('mig-numbers', 'mig-job-b', 'ignore', 'completed', '1.0', '2025-02-02 00:00:00+00'),
       ('mig-quiet', 'mig-job-a', 'ignore', 'completed', NULL, '2025-01-01 00:00:00+00'),
       ('mig-open', 'mig-job-b', 'ignore', NULL, NULL, NULL);
"""


async def test_migration_26_stores_each_result_once_and_every_edge_reads_it_back(
    test_databases, make_settings, clock
):
    """Migration 26 moves the results copied onto edges into werk_dep_results: one row per
    distinct result of a dependency, counting its edges, the one of a job kept completed named
    by its completion (so that its later dependents count on it). Every edge reads back what it
    held, and the counts then move with pushes and deletions."""
    name = f"werk_results_{id(test_databases) % 10000}"
    jids = ["mig-job-a", "mig-job-b", "mig-job-c", "mig-job-d", "mig-job-e"]
    try:
        url = await database_before(test_databases, name, 26, RESULTS_ON_EDGES)
        held = await sql(
            url,
            "SELECT jid, dep, outcome, result, settled_at FROM werk_job_deps ORDER BY jid, dep",
        )
        await prepare_database(url)
        conn = await connect(url)
        try:
            read = await queries.job_dependencies(conn, jids, 1 << 30, 1000)
        finally:
            await conn.close()
        # (The server's connections decode JSON; the test's read it as text.)
        assert [(r["jid"], r["dep"], r["outcome"], r["result"], r["settled_at"]) for r in read] == [
            (h["jid"], h["dep"], h["outcome"], h["result"] and json.loads(h["result"]),
             h["settled_at"])
            for h in held
        ]  # fmt: skip
        rows = await sql(
            url,
            "SELECT dep, completed_at, result::text, refs, result_size"
            " FROM werk_dep_results ORDER BY dep, completed_at",
        )
        assert [tuple(r) for r in rows] == [
            ("mig-gone", datetime(2025, 1, 1, tzinfo=UTC), '"older"', 1, 7),
            ("mig-gone", datetime(2025, 6, 1, tzinfo=UTC), '"old"', 2, 5),
            ("mig-kept", datetime(2026, 1, 1, tzinfo=UTC), '{"v": 1}', 3, 8),
            # Equal as jsonb, written apart by the API: each edge reads back its own.
            ("mig-numbers", datetime(2025, 2, 1, tzinfo=UTC), "1", 1, 1),
            ("mig-numbers", datetime(2025, 2, 2, tzinfo=UTC), "1.0", 1, 3),
        ]
        columns = await sql(
            url,
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = 'werk_job_deps' AND column_name LIKE 'result%'",
        )
        assert [c[0] for c in columns] == ["result_at"]
        app = create_app(make_settings(database_url=url), clock=clock, background=False)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://werk.test") as http,
        ):
            r = await http.post(
                "/v1/jobs", json={"jobtype": "t", "jid": "mig-job-f", "depends_on": ["mig-kept"]}
            )
            assert r.status_code == 201, r.text
            assert (await http.delete("/v1/jobs/mig-job-d")).status_code == 204
            assert (await http.delete("/v1/jobs/mig-job-e")).status_code == 204
            got = (await http.get("/v1/jobs/mig-job-f")).json()["dependencies"]
        assert [(d["jid"], d["result"]) for d in got] == [("mig-kept", {"v": 1})]
        rows = await sql(
            url, "SELECT dep, result::text, refs FROM werk_dep_results ORDER BY dep, completed_at"
        )
        assert [tuple(r) for r in rows] == [
            ("mig-gone", '"old"', 1),
            ("mig-kept", '{"v": 1}', 4),
            ("mig-numbers", "1", 1),
            ("mig-numbers", "1.0", 1),
        ]
    finally:
        await test_databases.drop(name)


DOT_SEGMENT_QUEUES = """
INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at,
                       retry_count, failed_at, errtype, message, finished_at)
VALUES ('dot-available', 't', '.', '[]', 'available', now(), now(), now(), 0, NULL, NULL, NULL,
        NULL),
       ('dots-dead', 't', '..', '[]', 'dead', now(), now(), now(), 25, now(), 'E', 'm', now());
INSERT INTO werk_queues (name, paused) VALUES ('..', true);
"""

SQL_PUSH = "SELECT werk.push('t', '[]', jsonb_build_object('queue', $1::text))"


async def test_migration_28_keeps_the_jobs_of_a_dot_segment_queue_and_refuses_new_ones(
    test_databases, make_settings, clock
):
    """Migration 28 refuses the queue names "." and ".." (no URL path can name them) wherever a
    queue name is written, and keeps the jobs and queues a database already holds under them:
    they read back as they were, and can still be settled, retried and deleted by jid."""
    name = f"werk_dots_{id(test_databases) % 10000}"
    try:
        url = await database_before(test_databases, name, 28, DOT_SEGMENT_QUEUES)
        query = "SELECT jid, queue, state::text FROM werk_jobs ORDER BY jid"
        before = await sql(url, query)
        await prepare_database(url)
        assert await sql(url, query) == before
        assert [tuple(r) for r in await sql(url, "SELECT name, paused FROM werk_queues")] == [
            ("..", True)
        ]
        for queue in (".", ".."):
            with pytest.raises(asyncpg.CheckViolationError):
                await sql(
                    url,
                    "INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at,"
                    " enqueued_at) VALUES ('dot-new-1', 't', $1, '[]', 'available', now(), now(),"
                    " now())",
                    queue,
                )
            with pytest.raises(asyncpg.CheckViolationError):
                await sql(url, "INSERT INTO werk_queues (name) VALUES ($1)", queue)
            with pytest.raises(asyncpg.InvalidParameterValueError, match="invalid_request: queue"):
                await sql(url, SQL_PUSH, queue)
        conn = await connect(url)
        try:
            (claimed,) = await queries.fetch_jobs(conn, None, ["."], ["w-1"])
            acked, kept = await queries.ack_jobs(
                conn, None, {"dot-available": claimed["lease"]}, keep_completed=True
            )
            assert (acked, kept) == ({"dot-available"}, {"dot-available"})
        finally:
            await conn.close()
        app = create_app(make_settings(database_url=url), clock=clock, background=False)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://werk.test") as http,
        ):
            for queue in (".", ".."):
                r = await http.post("/v1/jobs", json={"jobtype": "t", "queue": queue})
                assert (r.status_code, r.json()["code"]) == (422, "invalid_request"), r.text
            assert (await http.get("/v1/jobs/dot-available")).json()["state"] == "completed"
            r = await http.post("/v1/jobs/dots-dead/retry")
            assert (r.status_code, r.json()["state"]) == (200, "available"), r.text
            assert (await http.delete("/v1/jobs/dots-dead")).status_code == 204
            assert (await http.delete("/v1/jobs/dot-available")).status_code == 204
        assert await sql(url, "SELECT jid FROM werk_stored_jobs") == []
    finally:
        await test_databases.drop(name)
