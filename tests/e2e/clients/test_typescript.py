"""The TypeScript SDK (client/typescript): its node:test suite (client, worker, contract replay)
against a real server, and its Worker processing jobs pushed by the Python SDK."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.e2e.clients.toolchains import TS_DIR, node_ready, run
from tests.support.server import ServerProcess, clean_env
from werk_client import Client


@pytest.fixture(scope="module")
def node() -> str:
    return node_ready()


def test_typescript_suite(node: str, shared_werk: ServerProcess) -> None:
    files = sorted(str(p.relative_to(TS_DIR)) for p in (TS_DIR / "dist/test").glob("*.test.js"))
    assert len(files) >= 3, files
    env = clean_env({"WERK_URL": shared_werk.url})
    out = run([node, "--test", *files], TS_DIR, timeout=240, env=env)
    assert "# fail 0" in out, out[-3000:]


def test_node_worker_processes_jobs_pushed_from_python(
    node: str, shared_werk: ServerProcess, tmp_path: Path
) -> None:
    queue = f"py-to-node-{uuid.uuid4().hex[:8]}"
    with Client(shared_werk.url) as client:
        pushed = client.push_many(
            [{"jobtype": "echo", "args": [i, "from-python"], "queue": queue} for i in range(12)]
        )
    out = tmp_path / "done.jsonl"
    env = clean_env({"WERK_URL": shared_werk.url, "QUEUE": queue, "OUT": str(out), "EXPECT": "12"})
    subprocess.run(
        [node, "dist/test/fixtures/worker-process.js"], cwd=TS_DIR, env=env, timeout=90, check=True
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    done = {line["jid"]: line["args"] for line in lines if line["event"] == "done"}
    assert done == {job.jid: [i, "from-python"] for i, job in enumerate(pushed.jobs)}
    assert lines[-1] == {"event": "exit", "processed": 12, "failed": 0}


def test_committed_types_match_the_openapi_document(node: str, tmp_path: Path) -> None:
    """src/openapi.ts is generated (`npm run generate`); it must follow openapi/openapi.json."""
    fresh = tmp_path / "openapi.ts"
    run(
        [node, "node_modules/openapi-typescript/bin/cli.js", "../../openapi/openapi.json",
         "-o", str(fresh), "--default-non-nullable=false"],
        TS_DIR, timeout=120,
    )  # fmt: skip
    committed = (TS_DIR / "src/openapi.ts").read_text()
    assert fresh.read_text() == committed, "run `npm run generate` in client/typescript"
