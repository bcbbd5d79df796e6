"""Real worker processes against a real server: jobs run, are acked, failures are reported."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from werk_client import Client, JobNotFound, JobSpec

from .workers import WorkerProcess, lines, wait_for


def _gone(client: Client, jid: str) -> bool:
    try:
        client.get(jid)
    except JobNotFound:
        return True
    return False


def test_pushed_jobs_are_processed_and_acked(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        jobs = [client.push("record", [f"t{i}"]) for i in range(10)]
        jobs += client.push_many(
            [JobSpec("async_record", [f"a{i}"]) for i in range(10)]
            + [JobSpec("whole_job", [f"w{i}"]) for i in range(5)]
        ).jobs
        with WorkerProcess(werk_server.url, tmp_path, "--concurrency", "5") as worker:
            wait_for(lambda: len(lines(tmp_path, "done.txt")) >= 25, timeout=30)
            wait_for(lambda: all(_gone(client, j.jid) for j in jobs), timeout=30)
            info = client.info()
            assert info.totals.processed == 25 and info.totals.failed == 0
            worker.signal(signal.SIGTERM)
            assert worker.wait(20) == 0
        done = lines(tmp_path, "done.txt")
        assert sorted(line.split()[0] for line in done if not line.startswith("whole")) == sorted(
            [f"t{i}" for i in range(10)] + [f"a{i}" for i in range(10)]
        )
        assert sum(line.startswith("whole") for line in done) == 5
        assert all("attempt=1" in line for line in done if line.startswith("a"))
        # Middleware ran around every job.
        middle = lines(tmp_path, "middleware.txt")
        assert len(middle) == 50 and sum(m.startswith("before") for m in middle) == 25
        log = worker.log
        assert "job done" in log and f"jid={jobs[0].jid}" in log and "jobtype=record" in log


def test_handler_exceptions_are_failed_with_type_message_and_backtrace(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        boom = client.push("boom", ["it broke"], retry=3, backtrace=20)
        later = client.push("retry_in", [3600])
        bury = client.push("no_retry", ["not a number"])
        unknown = client.push("no_such_jobtype", [])
        with WorkerProcess(werk_server.url, tmp_path):
            failed = wait_for(lambda: client.get(boom.jid).failure, timeout=30)
            assert failed.errtype == "ValueError" and failed.message == "it broke"
            assert failed.retry_count == 1 and failed.remaining == 2
            assert any("jobs_app.py" in line for line in failed.backtrace)
            assert failed.backtrace[-1] == "ValueError: it broke"
            assert not any("werk_client" in line for line in failed.backtrace)
            assert client.get(boom.jid).state == "scheduled"

            rescheduled = wait_for(lambda: client.get(later.jid).failure, timeout=30)
            assert rescheduled.errtype == "RetryIn" and rescheduled.message == "rate limited"
            assert rescheduled.next_at is not None
            delay = rescheduled.next_at - datetime.now(UTC)
            assert timedelta(minutes=55) < delay <= timedelta(hours=1)

            dead = wait_for(lambda: client.get(bury.jid).state == "dead" and client.get(bury.jid))
            assert dead.failure is not None and dead.failure.errtype == "ValueError"
            assert "invalid literal" in dead.failure.message

            lost = wait_for(lambda: client.get(unknown.jid).failure, timeout=30)
            assert lost.errtype == "UnknownJobType"

            # Skip the 15 s+ backoff: the retry runs and fails again, counted.
            httpx.post(f"{werk_server.url}/v1/jobs/{boom.jid}/retry").raise_for_status()
            again = wait_for(lambda: (f := client.get(boom.jid).failure).retry_count == 2 and f)
            assert again.remaining == 1 and again.errtype == "ValueError"


def test_retry_in_zero_retries_at_once_until_the_budget_is_spent(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("retry_in", [0], retry=2)
        with WorkerProcess(werk_server.url, tmp_path):
            dead = wait_for(lambda: client.get(job.jid).state == "dead", timeout=30)
        assert dead
        final = client.get(job.jid)
        assert final.failure is not None and final.failure.retry_count == 3
        assert final.attempt == 3


def test_json_logs_carry_jid_and_jobtype(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("noop", [])
        with WorkerProcess(werk_server.url, tmp_path, "--log-format", "json") as worker:
            wait_for(lambda: _gone(client, job.jid), timeout=30)
            wait_for(lambda: "job done" in worker.log)
        records = [json.loads(line) for line in worker.log.splitlines() if line.startswith("{")]
        done = [r for r in records if r["msg"] == "job done"]
        assert done and done[0]["jid"] == job.jid and done[0]["jobtype"] == "noop"
        assert "duration_ms" in done[0]


@pytest.mark.parametrize("handler", ["steps", "async_steps"])
def test_checkpoints_are_stored_as_progress(werk_server, tmp_path, handler):
    with Client(werk_server.url) as client:
        job = client.push(handler, [3, 0.01] if handler == "steps" else [3])
        with WorkerProcess(werk_server.url, tmp_path):
            wait_for(lambda: _gone(client, job.jid), timeout=30)
        assert any(line.startswith(handler) for line in lines(tmp_path, "done.txt"))
