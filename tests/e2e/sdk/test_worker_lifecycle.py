"""Shutdown, leases, checkpoints, quiet/terminate and process mode, with real processes."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.support.helpers import sql
from werk_client import Client, JobNotFound

from .workers import WorkerProcess, lines, wait_for


def _done(client: Client, jid: str) -> int:
    """The steps handler's last stored checkpoint."""
    return int((client.get(jid).progress or {}).get("done", 0))


def _gone(client: Client, jid: str) -> bool:
    try:
        client.get(jid)
    except JobNotFound:
        return True
    return False


def _started(workdir, token: str) -> bool:
    return any(line.startswith(f"{token} ") for line in lines(workdir, "started.txt"))


@pytest.mark.parametrize(
    ("jobtype", "options"),
    [("sleepy", ()), ("async_sleepy", ()), ("sleepy", ("--process",))],
)
def test_sigterm_mid_job_fails_it_so_it_retries_and_nothing_is_lost(
    werk_server, tmp_path, jobtype, options
):
    with Client(werk_server.url) as client:
        job = client.push(jobtype, [60, "long"])
        quick = [client.push("record", [f"q{i}"]) for i in range(5)]
        worker = WorkerProcess(werk_server.url, tmp_path, "--grace", "1", *options).start()
        try:
            wait_for(lambda: _started(tmp_path, "long"), timeout=30)
            wait_for(lambda: all(_gone(client, j.jid) for j in quick), timeout=30)
            began = time.monotonic()
            worker.signal(signal.SIGTERM)
            assert worker.wait(20) == 0
            assert time.monotonic() - began < 10
        finally:
            worker.kill()
        interrupted = client.get(job.jid)
        assert interrupted.state in ("scheduled", "available")
        assert interrupted.failure is not None
        assert interrupted.failure.errtype == "WorkerShutdown"
        assert interrupted.failure.next_at is None or interrupted.failure.next_at <= (
            datetime.now(UTC) + timedelta(seconds=5)
        )
        assert "long attempt=1" not in lines(tmp_path, "done.txt")
        # The retry runs on the next worker, once.
        with WorkerProcess(werk_server.url, tmp_path, *options):
            wait_for(lambda: _gone(client, job.jid), timeout=30)
        assert [x for x in lines(tmp_path, "done.txt") if x.startswith("long")] == [
            "long attempt=2"
        ]


def test_sigterm_lets_a_job_finish_within_the_grace_period(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("sleepy", [2, "short"])
        worker = WorkerProcess(werk_server.url, tmp_path, "--grace", "20").start()
        try:
            wait_for(lambda: _started(tmp_path, "short"), timeout=30)
            worker.signal(signal.SIGTERM)
            assert worker.wait(20) == 0
        finally:
            worker.kill()
        assert lines(tmp_path, "done.txt") == ["short attempt=1"]
        assert _gone(client, job.jid)
        assert client.info().totals.failed == 0


def test_a_second_sigint_cuts_the_grace_period_short(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("sleepy", [60, "cut-short"])
        worker = WorkerProcess(werk_server.url, tmp_path, "--grace", "40").start()
        try:
            wait_for(lambda: _started(tmp_path, "cut-short"), timeout=30)
            began = time.monotonic()
            worker.signal(signal.SIGINT)
            wait_for(lambda: "shutting down" in worker.log, timeout=10)
            time.sleep(0.5)
            assert worker.process is not None and worker.process.poll() is None  # in its grace
            worker.signal(signal.SIGINT)
            assert worker.wait(20) == 0
            assert time.monotonic() - began < 15
        finally:
            worker.kill()
        failure = client.get(job.jid).failure
        assert failure is not None and failure.errtype == "WorkerShutdown"


def test_lease_extension_keeps_a_long_job_from_being_handed_out_twice(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("sleepy", [8, "long"], reserve_for=60)
        env = {"WERK_EXTEND_FRACTION": "0.03"}  # extend every 1.8 s
        with WorkerProcess(werk_server.url, tmp_path, env=env):
            wait_for(lambda: _started(tmp_path, "long"), timeout=30)
            # Make the lease nearly spent: without extensions it expires in 2 s and the server
            # would fail the job (ReservationExpired) and hand it out again.
            soon = datetime.now(UTC) + timedelta(seconds=2)
            _run(sql(werk_server.database_url, _SET_EXPIRY, job.jid, soon))
            expiries = set()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    current = client.get(job.jid)
                except JobNotFound:
                    break  # finished (and acked) already
                assert current.state == "active" and current.attempt == 1
                expiries.add(current.lease_expires_at)
                assert client.fetch(["default"], wid="rival", count=10) == []
                time.sleep(0.25)
            assert max(expiries) > datetime.now(UTC) + timedelta(seconds=30)
            assert len(expiries) >= 2  # moved forward more than once
            wait_for(lambda: _gone(client, job.jid), timeout=20)
        assert lines(tmp_path, "done.txt") == ["long attempt=1"]
        assert client.info().totals.failed == 0


def test_a_job_whose_lease_expired_is_not_acked_and_the_loss_is_logged(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("sleepy", [4, "slow"], reserve_for=60)
        env = {"WERK_EXTEND_FRACTION": "0.45"}  # first extension after 27 s: too late
        with WorkerProcess(werk_server.url, tmp_path, env=env) as worker:
            wait_for(lambda: _started(tmp_path, "slow"), timeout=30)
            soon = datetime.now(UTC) + timedelta(seconds=1)
            _run(sql(werk_server.database_url, _SET_EXPIRY, job.jid, soon))
            failure = wait_for(lambda: client.get(job.jid).failure, timeout=20)
            assert failure.errtype == "ReservationExpired"
            wait_for(lambda: "lease was lost" in worker.log, timeout=20)
        assert client.get(job.jid).state == "scheduled"


def test_lease_lost_while_running_stops_treating_the_job_as_ours(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("async_sleepy", [5, "taken"], reserve_for=60)
        env = {"WERK_EXTEND_FRACTION": "0.02"}  # extends every 1.2 s
        with WorkerProcess(werk_server.url, tmp_path, env=env) as worker:
            wait_for(lambda: _started(tmp_path, "taken"), timeout=30)
            # An operator kills the running job: its lease is revoked.
            _admin(werk_server.url, f"/v1/jobs/{job.jid}/kill")
            wait_for(lambda: "lease lost" in worker.log, timeout=20)
            time.sleep(5.5)  # past the end of the handler's sleep
        assert client.get(job.jid).state == "dead"
        assert lines(tmp_path, "done.txt") == []  # the async handler was cancelled
        assert "job done" not in worker.log and "job failed" not in worker.log


def test_a_thread_whose_job_was_taken_away_does_not_block_the_next_job(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("sleepy", [8, "zombie"], reserve_for=60)
        env = {"WERK_EXTEND_FRACTION": "0.02"}
        with WorkerProcess(werk_server.url, tmp_path, "--concurrency", "1", env=env) as worker:
            wait_for(lambda: _started(tmp_path, "zombie"), timeout=30)
            _admin(werk_server.url, f"/v1/jobs/{job.jid}/kill")
            wait_for(lambda: "lease lost" in worker.log, timeout=20)
            after = client.push("record", ["next"])
            wait_for(lambda: _gone(client, after.jid), timeout=5)  # long before the 8 s end
            assert "zombie attempt=1" not in lines(tmp_path, "done.txt")
        assert client.get(job.jid).state == "dead"


def test_checkpoint_survives_kill_9_and_the_next_attempt_resumes(werk_server_factory, tmp_path):
    server = werk_server_factory(env={"WERK_WORKER_TIMEOUT": "2"})
    with Client(server.url) as client:
        job = client.push("steps", [8, 0.3])
        worker = WorkerProcess(server.url, tmp_path).start()
        try:
            # Killed once a checkpoint past the first steps is stored (the handler notes a step,
            # then checkpoints it: the note alone can be seen before its checkpoint lands).
            wait_for(lambda: _done(client, job.jid) >= 3, timeout=30)
            worker.signal(signal.SIGKILL)
            worker.wait(10)
        finally:
            worker.kill()
        lost = wait_for(lambda: client.get(job.jid).failure, timeout=30)
        assert lost.errtype == "WorkerLost"
        saved = client.get(job.jid).progress["done"]
        assert saved >= 3
        # Skip the retry backoff (15 s or more) rather than wait it out.
        _run(
            sql(server.database_url, "UPDATE werk_jobs SET run_at = now() WHERE jid = $1", job.jid)
        )
        with WorkerProcess(server.url, tmp_path):
            wait_for(lambda: _gone(client, job.jid), timeout=30)
        steps = lines(tmp_path, "steps.txt")
        assert f"start attempt=2 from={saved}" in steps
        assert [s for s in steps if s.endswith("attempt=2") and s.startswith("step")] == [
            f"step {n} attempt=2" for n in range(saved, 8)
        ]


def test_quiet_stops_fetching_and_terminate_stops_the_worker(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        running = client.push("sleepy", [3, "during-quiet"])
        worker = WorkerProcess(werk_server.url, tmp_path, "--wid", "w-quiet").start()
        try:
            wait_for(lambda: _started(tmp_path, "during-quiet"), timeout=30)
            _admin(werk_server.url, "/v1/workers/w-quiet/quiet")
            wait_for(lambda: "quiet:" in worker.log, timeout=10)
            time.sleep(3)  # let the last long poll (1 s) end, even on a loaded machine
            waiting = client.push("record", ["after-quiet"])
            wait_for(lambda: _gone(client, running.jid), timeout=20)  # running job finished
            time.sleep(1.5)
            assert client.get(waiting.jid).state == "available"
            assert worker.process is not None and worker.process.poll() is None
            _admin(werk_server.url, "/v1/workers/w-quiet/terminate")
            assert worker.wait(20) == 0
        finally:
            worker.kill()
        assert client.get(waiting.jid).state == "available"
        assert lines(tmp_path, "done.txt") == ["during-quiet attempt=1"]


def test_terminate_fails_running_jobs_at_once_and_exits(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        job = client.push("sleepy", [60, "cut"])
        worker = WorkerProcess(
            werk_server.url, tmp_path, "--wid", "w-term", "--grace", "30"
        ).start()
        try:
            wait_for(lambda: _started(tmp_path, "cut"), timeout=30)
            _admin(werk_server.url, "/v1/workers/w-term/terminate")
            assert worker.wait(15) == 0
        finally:
            worker.kill()
        failure = client.get(job.jid).failure
        assert failure is not None and failure.errtype == "WorkerShutdown"


def test_process_mode_survives_handlers_that_exit_or_segfault(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        exits = client.push("exit_hard", [3])
        crash = client.push("segfault", [])
        boom = client.push("boom", ["in a child"], backtrace=10)
        after = [client.push("pid", [f"p{i}"]) for i in range(4)]
        steps = client.push("steps", [2, 0.01])
        coroutine = client.push("async_record", ["in-child"])
        with WorkerProcess(werk_server.url, tmp_path, "--process", "--concurrency", "2") as worker:
            died = wait_for(lambda: client.get(exits.jid).failure, timeout=30)
            assert died.errtype == "ChildProcessDied" and "code 3" in died.message
            segv = wait_for(lambda: client.get(crash.jid).failure, timeout=30)
            assert segv.errtype == "ChildProcessDied" and "SIGSEGV" in segv.message
            failed = wait_for(lambda: client.get(boom.jid).failure, timeout=30)
            assert failed.errtype == "ValueError" and failed.message == "in a child"
            assert any("jobs_app.py" in line for line in failed.backtrace)
            wait_for(
                lambda: all(_gone(client, j.jid) for j in [*after, steps, coroutine]), timeout=30
            )
            assert worker.process is not None and worker.process.poll() is None
            pids = {line.split("pid=")[1] for line in lines(tmp_path, "done.txt") if "pid=" in line}
            assert len(pids) == 4 and str(worker.pid) not in pids


_SET_EXPIRY = "UPDATE werk_jobs SET lease_expires_at = $2 WHERE jid = $1"


def _admin(url: str, path: str) -> None:
    """Operator actions are not part of the SDK; plain HTTP is enough here."""
    httpx.post(url + path, timeout=10).raise_for_status()


def _run(coro):
    import asyncio

    return asyncio.run(coro)
