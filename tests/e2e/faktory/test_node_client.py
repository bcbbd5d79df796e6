"""The npm `faktory-worker` client (4.x), unmodified, against a real `werk serve` process.
The packages come from tests/e2e/faktory/node/package-lock.json (`npm ci` in the fixture); without
Node these tests skip and say how to install it."""

from __future__ import annotations

import json
import subprocess
import time

import httpx

from tests.e2e.faktory.procs import (
    node_worker,
    read_lines,
    set_worker_state,
    wait_for,
    wait_for_beat_after,
    worker_row,
)


def job_json(server, jid):
    r = httpx.get(f"{server.url}/v1/jobs/{jid}")
    return r.json() if r.status_code == 200 else None


def node(node_dir, *argv, timeout=30):
    return subprocess.run(
        ["node", *argv], cwd=node_dir, capture_output=True, text=True, timeout=timeout
    )


def test_push_pushb_work_and_retry(node_client, fwp_server, tmp_path):
    url = fwp_server.faktory_url()
    pushed = node(node_client, "push.js", url, "nodeq")
    assert pushed.returncode == 0, pushed.stderr
    result = json.loads(pushed.stdout)
    jids = result["jids"]
    assert len(jids) == 5
    assert list(result["rejected"]) == ["short"]  # PUSHB reported the bad job only
    assert result["info"]["faktory"]["queues"] == {"nodeq": 5}
    for jid in jids:
        assert job_json(fwp_server, jid)["state"] == "available"
    boom_jid = jids[2]
    assert job_json(fwp_server, boom_jid)["retry"] == 3

    out = tmp_path / "done.jsonl"
    worker = node_worker(node_client, url, "nodeq", "node-worker-1", out, tmp_path / "node.log")
    try:
        wait_for(lambda: len(read_lines(out)) == 4, 20, "four ok jobs")
        assert sorted(line["args"][0] for line in read_lines(out)) == [1, 2, 3, 4]
        failed = wait_for(
            lambda: (j := job_json(fwp_server, boom_jid)) and j["failure"] and j,
            20,
            "the boom job's failure",
        )
        assert failed["state"] == "scheduled"
        f = failed["failure"]
        assert f["message"] == "node boom x" and f["retry_count"] == 1 and f["remaining"] == 2
        assert f["errtype"] == "undefined"  # the Node client sends `${err.code}`
        assert f["backtrace"] and "node boom x" in f["backtrace"][0]
        wait_for(
            lambda: all(job_json(fwp_server, j) is None for i, j in enumerate(jids) if i != 2),
            10,
            "the ok jobs to be acked",
        )
        row = worker_row(fwp_server.process.database_url, "node-worker-1")
        assert row is not None
        assert worker.alive(), worker.output()
    finally:
        worker.stop()


def test_quiet_then_terminate(node_client, fwp_server, tmp_path):
    db = fwp_server.process.database_url
    url = fwp_server.faktory_url()
    out = tmp_path / "done.jsonl"
    worker = node_worker(node_client, url, "nq", "node-quiet-1", out, tmp_path / "node.log", beat=1)
    try:
        wait_for(lambda: worker_row(db, "node-quiet-1"), 15, "the worker's HELLO")
        since = set_worker_state(fwp_server.url, db, "node-quiet-1", "quiet")
        wait_for_beat_after(db, "node-quiet-1", since, 15)
        time.sleep(2.5)  # FETCHes already in flight end within the fetch wait
        r = httpx.post(
            f"{fwp_server.url}/v1/jobs",
            json={"jid": "node-quiet-job", "jobtype": "ok", "queue": "nq"},
        )
        assert r.status_code == 201
        time.sleep(3)
        assert job_json(fwp_server, "node-quiet-job")["state"] == "available"
        assert worker.alive(), worker.output()

        set_worker_state(fwp_server.url, db, "node-quiet-1", "terminate")
        assert worker.wait_exit(20) == 0, worker.output()  # stops cleanly (sends END)
        assert read_lines(out) == []
    finally:
        worker.stop()


def test_password(node_client, fwp_server_factory, tmp_path):
    server = fwp_server_factory(WERK_FAKTORY_PASSWORD="node-secret")
    refused = node(node_client, "connect.js", server.faktory_url("wrong"))
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "Invalid password" in refused.stdout
    accepted = node(node_client, "connect.js", server.faktory_url("node-secret"))
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr

    url = server.faktory_url("node-secret")
    pushed = node(node_client, "push.js", url, "npw")
    assert pushed.returncode == 0, pushed.stderr
    out = tmp_path / "done.jsonl"
    worker = node_worker(node_client, url, "npw", "node-pw-worker", out, tmp_path / "node.log")
    try:
        wait_for(lambda: len(read_lines(out)) == 4, 20, "the jobs")
    finally:
        worker.stop()
