"""The SQL interface's contract, pinned: the functions of schema werk an application may call
(names, arguments with their defaults, results), how they run, and what the werk_app role may
do: execute them, and read or change nothing else. A change here is a change of the interface,
made in a new migration."""

from __future__ import annotations

import asyncpg
import pytest

from tests.support.helpers import sql

INTERFACE = [
    ("ack", "jid text, lease text, result jsonb DEFAULT NULL::jsonb", "boolean"),
    ("fail", "jid text, lease text, error jsonb DEFAULT '{}'::jsonb", "text"),
    ("push", "jobtype text, args jsonb, opts jsonb DEFAULT '{}'::jsonb", "text"),
    ("push_many", "jobs jsonb", "SETOF text"),
]
SIGNATURES = [
    "werk.ack(text,text,jsonb)",
    "werk.fail(text,text,jsonb)",
    "werk.push(text,jsonb,jsonb)",
    "werk.push_many(jsonb)",
]


async def test_the_functions_and_their_signatures(database_url):
    rows = await sql(
        database_url,
        """SELECT p.proname, pg_get_function_arguments(p.oid) AS args,
                  pg_get_function_result(p.oid) AS result, p.prosecdef, p.proconfig
           FROM pg_proc p
           WHERE p.pronamespace = 'werk'::regnamespace AND p.proname !~ '^_'
           ORDER BY p.proname""",
    )
    assert [(r["proname"], r["args"], r["result"]) for r in rows] == INTERFACE
    # Each runs as its owner with a search path the caller cannot change.
    assert all(r["prosecdef"] for r in rows)
    assert all(r["proconfig"] == ["search_path=public, pg_temp"] for r in rows)


async def test_werk_app_may_execute_the_interface_and_nothing_else(database_url):
    rows = await sql(
        database_url,
        """SELECT p.oid::regprocedure::text AS f,
                  has_function_privilege('werk_app', p.oid, 'EXECUTE') AS may
           FROM pg_proc p WHERE p.pronamespace = 'werk'::regnamespace ORDER BY 1""",
    )
    assert sorted(r["f"] for r in rows if r["may"]) == SIGNATURES
    role = await sql(
        database_url,
        "SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles "
        "WHERE rolname = 'werk_app'",
    )
    assert [tuple(role[0])] == [(False, False, False, False)]
    # No privilege on any table, sequence or view of this database.
    granted = await sql(
        database_url,
        """SELECT c.oid::regclass::text AS rel FROM pg_class c
           WHERE c.relkind IN ('r', 'v', 'm', 'S', 'p')
             AND c.relnamespace NOT IN ('pg_catalog'::regnamespace,
                                        'information_schema'::regnamespace)
             AND (has_table_privilege('werk_app', c.oid, 'SELECT')
                  OR has_table_privilege('werk_app', c.oid, 'INSERT')
                  OR has_table_privilege('werk_app', c.oid, 'UPDATE')
                  OR has_table_privilege('werk_app', c.oid, 'DELETE'))""",
    )
    assert granted == []


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT count(*) FROM werk_jobs",
        "SELECT count(*) FROM werk_counters",
        "SELECT count(*) FROM werk_queues",
        "SELECT count(*) FROM werk_workers",
        "UPDATE werk_jobs SET priority = 1",
        "SELECT werk._job('{\"jobtype\": \"x\"}', '')",
        "SELECT werk._canonical('[]')",
    ],
)
async def test_an_application_role_reads_and_changes_nothing(app_conn, statement):
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await app_conn.execute(statement)


async def test_an_application_role_pushes_acks_and_fails(app_conn, database_url):
    jid = await app_conn.fetchval("SELECT werk.push('mail', '[1]')")
    assert await app_conn.fetchval("SELECT werk.ack($1, gen_random_uuid()::text)", jid) is False
    assert await app_conn.fetchval("SELECT werk.fail($1, gen_random_uuid()::text)", jid) is None
    rows = await sql(database_url, "SELECT jid, state FROM werk_jobs")
    assert [tuple(r) for r in rows] == [(jid, "available")]


async def test_a_search_path_of_the_callers_cannot_redirect_the_functions(app_conn, database_url):
    # A caller's own werk_jobs (in a schema first on its path) is not where jobs go.
    await sql(database_url, "CREATE SCHEMA decoy")
    await sql(database_url, "CREATE TABLE decoy.werk_jobs (jid text)")
    await sql(database_url, "GRANT USAGE ON SCHEMA decoy TO PUBLIC")
    await sql(database_url, "GRANT ALL ON decoy.werk_jobs TO PUBLIC")
    await app_conn.execute("SET search_path = decoy, public")
    jid = await app_conn.fetchval("SELECT werk.push('mail', '[]')")
    assert await sql(database_url, "SELECT * FROM decoy.werk_jobs") == []
    assert [r["jid"] for r in await sql(database_url, "SELECT jid FROM public.werk_jobs")] == [jid]
