"""The Go client (client/go): `go test` (client, worker, contract replay) against a real server,
and its worker processing jobs pushed by the Node client (or by Python when node is absent)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.e2e.clients.toolchains import GO_DIR, TS_DIR, go_env, node_ready, run
from tests.support.server import ServerProcess
from werk_client import Client, Worker


@pytest.fixture(scope="module")
def go() -> dict[str, str]:
    return go_env()


def test_go_suite(go: dict[str, str], shared_werk: ServerProcess) -> None:
    env = {**go, "WERK_URL": shared_werk.url}
    run(["go", "vet", "./..."], GO_DIR, timeout=240, env=env)
    out = run(["go", "test", "-count=1", "-v", "./..."], GO_DIR, timeout=240, env=env)
    assert "--- FAIL" not in out
    assert "--- SKIP" not in out, out  # WERK_URL is set: nothing may skip
    assert "--- PASS: TestContract" in out


def _push_from_node(url: str, queue: str, count: int) -> list[str]:
    node = node_ready()
    env = {"WERK_URL": url, "QUEUE": queue, "COUNT": str(count), "JOBTYPE": "echo", "PATH": ""}
    out = run([node, "dist/test/fixtures/push.js"], TS_DIR, timeout=60, env=env)
    return list(json.loads(out)["jids"])


def test_go_worker_processes_jobs_pushed_from_node(
    go: dict[str, str], shared_werk: ServerProcess, tmp_path: Path
) -> None:
    queue = f"node-to-go-{uuid.uuid4().hex[:8]}"
    if shutil.which("node"):
        jids, origin = _push_from_node(shared_werk.url, queue, 12), "from-node"
    else:  # the TypeScript suite reports its own skip; still prove the Go worker cross-language
        with Client(shared_werk.url) as client:
            pushed = client.push_many(
                [{"jobtype": "echo", "args": [i, "from-python"], "queue": queue} for i in range(12)]
            )
        jids, origin = [j.jid for j in pushed.jobs], "from-python"
    binary = GO_DIR / ".cache" / "bin" / "werk-example-worker"
    run(["go", "build", "-o", str(binary), "./cmd/werk-example-worker"], GO_DIR, 240, go)
    out = tmp_path / "done.jsonl"
    env = {**go, "WERK_URL": shared_werk.url, "QUEUE": queue, "OUT": str(out), "EXPECT": "12"}
    subprocess.run([str(binary)], env=env, timeout=90, check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    done = {line["jid"]: line["args"] for line in lines if line["event"] == "done"}
    assert done == {jid: [i, origin] for i, jid in enumerate(jids)}
    assert lines[-1] == {"event": "exit", "processed": 12, "failed": 0}


def test_python_worker_processes_jobs_pushed_from_go(
    go: dict[str, str], shared_werk: ServerProcess
) -> None:
    queue = f"go-to-py-{uuid.uuid4().hex[:8]}"
    env = {**go, "WERK_URL": shared_werk.url, "QUEUE": queue, "COUNT": "12"}
    jids = json.loads(run(["go", "run", "./cmd/werk-example-push"], GO_DIR, 240, env))["jids"]
    done: dict[str, list[object]] = {}
    worker = Worker(url=shared_werk.url, queues=[queue], concurrency=4, fetch_wait=1)

    @worker.handler("echo")
    def echo(*args: object) -> None:
        done[str(len(done))] = list(args)
        if len(done) == 12:
            worker.stop()

    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert sorted(done.values(), key=lambda a: a[0]) == [[i, "from-go"] for i in range(12)]
    assert worker.processed == 12 and len(jids) == 12
