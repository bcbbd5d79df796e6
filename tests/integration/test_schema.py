"""The schema enforces the job rules itself, whatever writes to it, and agrees with the API's."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import asyncpg
import pytest

from tests.support.helpers import sql
from werk.domain.job import QUEUE_PATTERN

INSERT_JOB = """
    INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
    VALUES ('schema-job-1', 't', $1, '[]', 'available', now(), now(), now())
"""
NAMES = ["a", "x" * 100, "Az09._-", "", "x" * 101, "a b", "ü", "q/1", "line\n", "\nline"]
# Dot segments in /v1/queues/{queue}/...: refused; names that merely start with dots are not.
NAMES += [".", "..", ".a", "..a", "..."]


@pytest.mark.parametrize("name", NAMES)
async def test_queue_names_the_schema_accepts_are_those_the_api_accepts(database_url, name):
    valid = re.fullmatch(QUEUE_PATTERN, name) is not None
    for statement in (INSERT_JOB, "INSERT INTO werk_queues (name) VALUES ($1)"):
        try:
            await sql(database_url, statement, name)
        except asyncpg.CheckViolationError:
            assert not valid, (statement, name)
        else:
            assert valid, (statement, name)


async def test_a_claimed_job_is_in_the_primary_key_and_the_lease_index_only(database_url):
    """A claim changes the state, so it is never a HOT update: every index whose key or predicate
    admits an active row gets a new entry on every claim. Only these two need active jobs."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            """
            INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at,
                                   enqueued_at, lease, lease_expires_at, wid)
            VALUES ('schema-active-1', 't', 'q', '[]', 'active', now(), now(), now(),
                    gen_random_uuid(), now() + interval '1 hour', 'w')
            """
        )
        indexes = await conn.fetch(
            "SELECT indexrelid::regclass::text AS name, pg_get_expr(indpred, indrelid) AS pred "
            "FROM pg_index WHERE indrelid = 'werk_jobs'::regclass"
        )
        admitting = set()
        for index in indexes:
            predicate = index["pred"] or "true"
            if await conn.fetchval(
                f"SELECT {predicate} FROM werk_jobs WHERE jid = 'schema-active-1'"
            ):
                admitting.add(index["name"])
    finally:
        await conn.close()
    assert len(indexes) > 2
    assert admitting == {"werk_jobs_pkey", "werk_jobs_active_idx"}


# (column, a value the rules allow, one they refuse); each column's rule as the API states it.
COLUMN_RULES = [
    ("jid", "'schema-job-2'", "'short'"),
    ("jid", "'schema-job-2'", f"'{'j' * 101}'"),
    ("jobtype", "'t'", "''"),
    ("queue", "'q'", "'a b'"),
    ("args", "'[1]'", "'{}'"),
    ("custom", "'{}'", "'[]'"),
    ("priority", "1000", "1001"),
    ("reserve_for", "60", "59"),
    ("retry", "-1", "-2"),
    ("backtrace", "1000", "1001"),
    ("attempt", "0", "-1"),
    ("orphans", "0", "-1"),
    ("retry_count", "0", "-1"),
    ("message", "NULL", f"'{'m' * 10001}'"),
    ("unique_key", "'k'", "''"),
    ("unique_key", "'k'", f"'{'k' * 201}'"),
    ("unique_spec", "'{}'", "'[]'"),
    ("waiting_for", "NULL", "0"),
]


@pytest.mark.parametrize(("column", "good", "bad"), COLUMN_RULES)
async def test_each_column_rule_holds_on_insert_and_on_update(database_url, column, good, bad):
    """The single-column rules live in domains (migrations 0007, 0018), checked where a value is
    written: a push, and an update that sets the column. Neither may store a value the rule
    refuses."""
    values = dict(
        jid="'schema-job-2'", jobtype="'t'", queue="'q'", args="'[]'", state="'available'",
        run_at="now()", created_at="now()", enqueued_at="now()",
    )  # fmt: skip

    def insert(value: str) -> str:
        row = {**values, column: value}
        return f"INSERT INTO werk_jobs ({', '.join(row)}) VALUES ({', '.join(row.values())})"

    conn = await asyncpg.connect(database_url)
    try:
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute(insert(bad))
        await conn.execute(insert(good))
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute(f"UPDATE werk_jobs SET {column} = {bad}")
        assert await conn.fetchval("SELECT count(*) FROM werk_jobs") == 1
    finally:
        await conn.close()


async def test_the_table_checks_tie_columns_together_and_list_states_as_constants(database_url):
    """PostgreSQL reads a table's CHECK constraints back from their stored text and plans them
    again in every statement that writes a row (migration 0018): a rule on one column belongs in
    a domain, read once per connection, and a list of states is one array constant, not an
    ARRAY[...] expression that each statement folds again. The one exception,
    werk_jobs_never_completed, reads the state alone: werk_completed_jobs, whose rows are all
    completed, shares the state's type."""
    checks = await sql(
        database_url,
        "SELECT conname, cardinality(conkey) AS columns, pg_get_constraintdef(oid) AS def "
        "FROM pg_constraint WHERE conrelid = 'werk_jobs'::regclass AND contype = 'c'",
    )
    assert checks
    for check in checks:
        assert "ARRAY[" not in check["def"], check["conname"]
        if check["conname"] != "werk_jobs_never_completed":
            assert check["columns"] > 1, check["conname"]


async def test_only_a_waiting_job_counts_dependencies(database_url):
    """waiting_for (dependencies not yet settled) is held by a waiting job with dependencies."""
    insert = """
        INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at,
                               finished_at, waiting_for, dependencies)
        VALUES ($1, 't', 'q', '[]', $2, now(), now(), $3, $4, 1, $5)
    """
    now = datetime.now(UTC)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(insert, "schema-wait-1", "waiting", None, None, True)
        for row in [
            ("schema-wait-2", "waiting", None, None, False),
            ("schema-wait-3", "available", now, None, True),
            ("schema-wait-4", "skipped", None, now, True),
            ("schema-wait-5", "skipped", None, None, True),
        ]:
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute(insert, *row)
    finally:
        await conn.close()
