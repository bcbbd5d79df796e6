"""The PyPI `faktory` client (1.0.0), unmodified, against a real `werk serve` process."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.e2e.faktory.procs import (
    python_worker,
    read_lines,
    set_worker_state,
    wait_for,
    wait_for_beat_after,
    worker_row,
)

faktory = pytest.importorskip(
    "faktory",
    reason="Python client tests SKIPPED: PyPI `faktory` is missing; install the dev extras: "
    ".venv/bin/uv pip install --python .venv/bin/python -r requirements.lock",
)


def job_json(server, jid):
    r = httpx.get(f"{server.url}/v1/jobs/{jid}")
    return r.json() if r.status_code == 200 else None


def test_push_work_and_retry(fwp_server, tmp_path):
    url = fwp_server.faktory_url()
    with faktory.Client(faktory=url) as client:
        for i in range(3):
            assert client.queue("ok", args=[i, "x"], queue="py", jid=f"py-ok-00{i}")
        assert client.queue("boom", args=["bad"], queue="py", jid="py-boom-1")
    assert job_json(fwp_server, "py-ok-000")["state"] == "available"

    out = tmp_path / "done.jsonl"
    worker = python_worker(url, "py", "py-worker-1", out, tmp_path / "py-worker.log")
    try:
        wait_for(lambda: len(read_lines(out)) == 3, 20, "three ok jobs")
        failed = wait_for(
            lambda: (j := job_json(fwp_server, "py-boom-1")) and j["failure"] and j,
            20,
            "the boom job's failure",
        )
        assert sorted(line["args"][0] for line in read_lines(out)) == [0, 1, 2]
        assert failed["state"] == "scheduled"  # retried later, with the backoff
        f = failed["failure"]
        assert (f["errtype"], f["message"], f["retry_count"]) == ("ValueError", "boom bad", 1)
        assert f["remaining"] == 4  # the Python client sends retry=5
        wait_for(
            lambda: all(job_json(fwp_server, f"py-ok-00{i}") is None for i in range(3)),
            10,
            "the ok jobs to be acked (deleted)",
        )
        info = httpx.get(f"{fwp_server.url}/v1/info").json()
        assert info["totals"]["processed"] == 4 and info["totals"]["failed"] == 1
        row = worker_row(fwp_server.process.database_url, "py-worker-1")
        assert row is not None and "python" in row["labels"]
        assert worker.alive(), worker.output()
    finally:
        worker.stop()


def test_quiet_then_terminate(fwp_server, tmp_path):
    db = fwp_server.process.database_url
    url = fwp_server.faktory_url()
    out = tmp_path / "done.jsonl"
    worker = python_worker(url, "pq", "py-quiet-1", out, tmp_path / "py-worker.log", beat=1)
    try:
        wait_for(lambda: worker_row(db, "py-quiet-1"), 15, "the worker's HELLO")
        since = set_worker_state(fwp_server.url, db, "py-quiet-1", "quiet")
        wait_for_beat_after(db, "py-quiet-1", since, 15)
        with faktory.Client(faktory=url) as client:
            assert client.queue("ok", args=[1], queue="pq", jid="py-quiet-job")
        time.sleep(3)  # a quiet worker fetches nothing
        assert job_json(fwp_server, "py-quiet-job")["state"] == "available"
        assert worker.alive(), worker.output()

        since = set_worker_state(fwp_server.url, db, "py-quiet-1", "terminate")
        worker.wait_exit(20)  # the library exits the process when told to terminate
        assert read_lines(out) == []
    finally:
        worker.stop()


def test_password(fwp_server_factory, tmp_path):
    server = fwp_server_factory(WERK_FAKTORY_PASSWORD="py-secret")
    with pytest.raises(faktory.exceptions.FaktoryAuthenticationError):
        faktory.Client(faktory=server.faktory_url("wrong")).connect()
    with pytest.raises(faktory.exceptions.FaktoryAuthenticationError):
        faktory.Client(faktory=server.faktory_url()).connect()  # no password at all

    url = server.faktory_url("py-secret")
    with faktory.Client(faktory=url) as client:
        assert client.queue("ok", args=["pw"], queue="pw", jid="py-pw-job1")
    out = tmp_path / "done.jsonl"
    worker = python_worker(url, "pw", "py-pw-worker", out, tmp_path / "py-worker.log")
    try:
        wait_for(lambda: read_lines(out) == [{"jobtype": "ok", "args": ["pw"]}], 20, "the job")
    finally:
        worker.stop()


def test_pushb_through_the_clients_connection(fwp_server):
    """The Python client has no bulk helper; its connection sends PUSHB as any command."""
    conn = faktory.Client(faktory=fwp_server.faktory_url()).faktory
    conn.connect()
    try:
        jobs = [
            {"jid": "py-bulk-1", "jobtype": "ok", "args": [1], "queue": "bulk"},
            {"jid": "py-bulk-2", "jobtype": "ok", "args": [2], "queue": "bulk"},
            {"jid": "short", "jobtype": "ok", "args": []},
        ]
        conn.reply("PUSHB", json.dumps(jobs))
        rejected = json.loads(next(conn.get_message()))
        assert list(rejected) == ["short"]
        conn.reply("FETCH", "bulk")
        fetched = json.loads(next(conn.get_message()))
        assert fetched["jid"] == "py-bulk-1"
        conn.reply("ACK", json.dumps({"jid": "py-bulk-1"}))
        assert next(conn.get_message()) == "OK"
    finally:
        conn.disconnect()
    assert job_json(fwp_server, "py-bulk-2")["state"] == "available"
