"""The dashboard in a real browser: Debian's headless Chromium driven by playwright-core (node).

Needs /usr/bin/chromium (`apt-get update && apt-get install -y chromium chromium-driver`), node
and npm; playwright-core is installed from tests/e2e/web/browser/package-lock.json on first use.
Screenshots land in test-artifacts/dashboard/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
DRIVER = Path(__file__).parent / "browser"
ARTIFACTS = REPO / "test-artifacts" / "dashboard"
CHROMIUM = Path("/usr/bin/chromium")
INSTALL = "apt-get update && apt-get install -y chromium chromium-driver"
TOKEN = "browser-admin-token-0123456789"
XSS = "<script>alert('pwned')</script>"


def skip_loudly(reason: str) -> None:
    message = f"BROWSER TEST SKIPPED: {reason}"
    warnings.warn(message, stacklevel=2)
    print(f"\n{'!' * 78}\n{message}\n{'!' * 78}")
    pytest.skip(message)


def ensure_driver() -> None:
    if not CHROMIUM.exists():
        skip_loudly(f"{CHROMIUM} is missing; install it with: {INSTALL}")
    if shutil.which("node") is None or shutil.which("npm") is None:
        skip_loudly("node and npm are needed to drive Chromium (apt-get install -y nodejs npm)")
    if not (DRIVER / "node_modules" / "playwright-core").exists():
        result = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=DRIVER, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        if result.returncode != 0:
            skip_loudly(f"`npm ci` in {DRIVER} failed: {result.stderr[-500:]}")


def seed(url: str) -> dict[str, str]:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=url, headers=auth, timeout=30) as http:

        def push(**job: Any) -> str:
            r = http.post("/v1/jobs", json={"jobtype": "Report", **job})
            assert r.status_code == 201, r.text
            return str(r.json()["jid"])

        def fetch(queue: str, wid: str) -> dict[str, Any]:
            r = http.post("/v1/fetch", json={"queues": [queue], "wid": wid})
            (job,) = r.json()["jobs"]
            return dict(job)

        def fail(job: dict[str, Any], **extra: Any) -> None:
            body = {
                "lease": job["lease"],
                "errtype": "RuntimeError",
                "message": "the upstream said no",
                "backtrace": ["app/jobs.py:42 in perform", "app/client.py:7 in call"],
                **extra,
            }
            assert http.post(f"/v1/jobs/{job['jid']}/fail", json=body).status_code == 200

        for wid, host in (("worker-a", "box-1"), ("worker-b", "box-2")):
            http.post(
                "/v1/beat",
                json={
                    "wid": wid,
                    "hostname": host,
                    "pid": 4242,
                    "labels": ["python", "reports"],
                    "rss_kb": 81920,
                },
            )
        dead = push(queue="reports", retry=-1, args=[7, "quarterly"])
        fail(fetch("reports", "worker-a"))
        retrying = push(queue="reports", retry=3, args=[8])
        fail(fetch("reports", "worker-a"))
        assert retrying
        push(queue="reports", at="2999-01-01T00:00:00Z", args=["much later"])
        jobs = [{"jobtype": "SendEmail", "queue": "mail", "args": [i, f"user{i}@example.com"]}
                for i in range(300)]  # fmt: skip
        assert http.post("/v1/jobs/batch", json={"jobs": jobs}).status_code == 201
        xss = push(queue="mail", jobtype="Render", args=[XSS, {"html": "<b>bold</b>"}])
        for _ in range(3):
            push(queue="video", jobtype="Transcode", args=["movie.mp4"])
        fetch("video", "worker-b")  # a busy worker
        # some history: acked and failed work
        for i in range(5):
            push(queue="thumbs", args=[i], retry=0)
        for i in range(5):
            job = fetch("thumbs", "worker-b")
            if i % 2:
                fail(job)
            else:
                http.post(f"/v1/jobs/{job['jid']}/ack", json={"lease": job["lease"]})
        return {"dead": dead, "xss": xss}


def test_dashboard_in_chromium(werk_server_factory: Callable[..., Any]) -> None:
    ensure_driver()
    tokens = json.dumps([{"name": "ops", "token": TOKEN, "scopes": ["admin"]}])
    server = werk_server_factory(env={"WERK_TOKENS": tokens})
    jids = seed(server.url)
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    env = {**os.environ, "WERK_URL": server.url, "WERK_TOKEN": TOKEN,
           "WERK_DEAD_JID": jids["dead"], "WERK_XSS_JID": jids["xss"], "WERK_QUEUE": "mail",
           "ARTIFACTS": str(ARTIFACTS)}  # fmt: skip
    result = subprocess.run(
        ["node", "dashboard.mjs"], cwd=DRIVER, env=env, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(seen["screenshots"]) >= 12
    assert all(Path(p).stat().st_size > 5000 for p in seen["screenshots"])
    # what the clicks did, seen through the API
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=auth) as http:
        assert http.get("/v1/queues/mail").json()["paused"] is True
        assert http.get(f"/v1/jobs/{jids['dead']}").json()["state"] == "available"
