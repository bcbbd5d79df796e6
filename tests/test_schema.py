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
