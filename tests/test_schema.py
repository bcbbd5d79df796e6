"""The schema enforces the job rules itself, whatever writes to it, and agrees with the API's."""

from __future__ import annotations

import re

import asyncpg
import pytest

from tests.support.helpers import sql
from werk.domain.job import QUEUE_PATTERN

INSERT_JOB = """
    INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at)
    VALUES ('schema-job-1', 't', $1, '[]', 'available', now(), now(), now())
"""
NAMES = ["a", "x" * 100, "Az09._-", "", "x" * 101, "a b", "ü", "q/1", "line\n", "\nline"]


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
