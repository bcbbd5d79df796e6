"""The clients against a real server: every endpoint, typed results and typed errors."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from werk_client import (
    AsyncClient,
    Client,
    JobNotFound,
    JobSpec,
    LeaseLost,
    NotUnique,
    Unique,
    ValidationError,
)


def test_push_get_and_same_jid_twice(werk_server):
    with Client(werk_server.url) as client:
        job = client.push(
            "email", ["ada@example.com", 3], queue="mail", priority=5, custom={"k": 1}
        )
        assert len(job.jid) == 28 and job.state == "available"
        assert (job.jobtype, job.args, job.queue, job.priority) == (
            "email",
            ["ada@example.com", 3],
            "mail",
            5,
        )
        assert job.custom == {"k": 1} and job.created_at is not None
        again = client.push("email", ["other"], jid=job.jid)
        assert again.jid == job.jid and again.args == ["ada@example.com", 3]
        assert (job.created, again.created) == (True, False)
        stored = client.get(job.jid)
        assert stored == dataclasses.replace(job, created=None)


def test_scheduled_push_and_push_many(werk_server):
    with Client(werk_server.url) as client:
        later = client.push("later", at=timedelta(hours=1))
        assert later.state == "scheduled" and later.at is not None
        assert later.at > datetime.now(UTC) + timedelta(minutes=59)
        with pytest.raises(ValueError):
            client.push("naive", at=datetime(2030, 1, 1))
        specs = [JobSpec("batch", [i]) for i in range(1500)]
        result = client.push_many(specs)
        assert result.created == 1500 and [j.jid for j in result.jobs] == [s.jid for s in specs]
        assert (result.jids, result.existed) == ([s.jid for s in specs], [])
        again = client.push_many(specs[:10])
        assert again.created == 0 and again.existed == again.jids == [s.jid for s in specs[:10]]
        fresh = [JobSpec("jids", [i]) for i in range(1200)]
        short = client.push_jids([*fresh, specs[0]])
        assert short.jids == [s.jid for s in fresh] + [specs[0].jid]
        assert (short.created, short.existed) == (1200, [specs[0].jid])
        assert client.get(fresh[1100].jid).args == [1100]
        info = client.info()
        assert info.totals.enqueued >= 1501 or info.states.get("available", 0) >= 1500


def test_typed_errors(werk_server):
    with Client(werk_server.url) as client:
        with pytest.raises(JobNotFound) as missing:
            client.get("nope")
        assert (missing.value.code, missing.value.status) == ("job_not_found", 404)
        with pytest.raises(ValidationError) as invalid:
            client.push("x", queue="bad queue!")
        assert invalid.value.code == "invalid_request" and invalid.value.status in (400, 422)
        with pytest.raises(ValidationError) as batch:
            client.push_many([JobSpec("ok"), JobSpec("x", queue="no way!")])
        assert any("jobs.1" in str(e.get("loc")) for e in batch.value.errors)


def test_worker_side_calls(werk_server):
    with Client(werk_server.url) as client:
        pushed = client.push("work", [1], reserve_for=60, backtrace=5)
        assert client.fetch(["empty"], wid="w1", wait=0) == []
        [job] = client.fetch(["default"], wid="w1", count=10, wait=1)
        assert job.jid == pushed.jid and job.state == "active" and job.lease
        assert job.lease_expires_at is not None
        extended = client.extend(job.jid, job.lease, reserve_for=600, progress={"step": 2})
        assert extended.lease_expires_at > job.lease_expires_at
        result = client.fail(
            job.jid, job.lease, errtype="Boom", message="bad", backtrace=["a", "b"], retry_in=0
        )
        assert result.state == "scheduled"
        with pytest.raises(LeaseLost):
            client.ack(job.jid, job.lease)
        failed = client.get(job.jid)
        assert failed.failure is not None and failed.failure.errtype == "Boom"
        assert failed.failure.message == "bad" and failed.failure.backtrace == ["a", "b"]
        assert failed.progress == {"step": 2}
        [again] = client.fetch(["default"], wid="w1", wait=5)
        assert again.jid == job.jid and again.progress == {"step": 2}
        client.ack(again.jid, again.lease)
        with pytest.raises(JobNotFound):
            client.get(job.jid)
        assert client.beat("w1", hostname="h", pid=1, labels=["x"]) == "running"


async def test_async_client_roundtrip(werk_server):
    async with AsyncClient(werk_server.url) as client:
        specs = [JobSpec("a", [i]) for i in range(5)]
        await client.push_many(specs[:3])
        short = await client.push_jids(specs)
        assert short.jids == [s.jid for s in specs] and short.created == 2
        jobs = await client.fetch(["default"], wid="w2", count=5, wait=1)
        assert sorted(j.args[0] for j in jobs) == list(range(5))
        result = await client.ack_many(
            [(j.jid, j.lease) for j in jobs[:4]] + [(jobs[4].jid, "stale")]
        )
        assert sorted(result.acked) == sorted(j.jid for j in jobs[:4])
        assert result.lease_lost == [jobs[4].jid]
        assert (await client.info()).server.version


def test_unique_and_expiring_pushes(werk_server):
    with Client(werk_server.url) as client:
        first = client.push("report", [600], unique=Unique(for_=60, until="start"))
        assert first.unique is not None and first.unique["until"] == "start"
        with pytest.raises(NotUnique) as refused:
            client.push("report", [600.0], unique=Unique(for_=60))
        assert refused.value.existing_jid == first.jid and refused.value.status == 409
        same = client.push("report", [600], unique=Unique(on_conflict="existing"))
        assert same.jid == first.jid and same.duplicate and same.created is False
        replaced = client.push(
            "report", [600], unique=Unique(on_conflict="replace"), at=timedelta(minutes=5)
        )
        assert replaced.jid == first.jid and replaced.state == "scheduled"
        expiring = client.push("soon", expires_in=30)
        assert expiring.expires_at is not None and expiring.unique is None
        at = datetime.now(UTC) + timedelta(hours=1)
        assert client.push("soon", expires_at=at).expires_at == at
        specs = [
            JobSpec("batch", [1], unique=Unique(key="k-sdk")),
            JobSpec("batch", [2]),
            JobSpec("report", [600], unique=Unique(on_conflict="existing")),
        ]
        result = client.push_many(specs)
        assert result.created == 2
        assert [c.existing_jid for c in result.conflicts] == [first.jid]
        assert result.conflicts[0].index == 2 and result.jobs[2].jid == first.jid
        # Over two requests: the second's conflict is placed within the whole push.
        plain = [JobSpec("batch", [i]) for i in range(1000)]
        result = client.push_many([*plain, specs[2]])
        assert [(c.index, c.existing_jid) for c in result.conflicts] == [(1000, first.jid)]
        assert result.jids[1000] == result.jobs[1000].jid == first.jid
        refs = client.push_jids([JobSpec("batch", ref="r1"), *plain[:1], JobSpec("b", ref="r2")])
        assert refs.refs == {"r1": refs.jids[0], "r2": refs.jids[2]}


async def test_async_unique_push(werk_server):
    async with AsyncClient(werk_server.url) as client:
        first = await client.push("a", [1], unique=Unique(key="async-k"))
        with pytest.raises(NotUnique) as refused:
            await client.push("b", [2], unique=Unique(key="async-k"))
        assert refused.value.existing_jid == first.jid
        short = await client.push_jids([JobSpec("c", unique=Unique(key="async-k"))])
        assert short.jids == [first.jid] and short.conflicts[0].on_conflict == "reject"
