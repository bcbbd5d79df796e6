"""``python -m bench instructions``: the server's CPU instructions per request, counted by
valgrind's callgrind instead of timed.

On a virtual machine whose speed drifts by half within minutes (bench/README.md), a change worth
a few per cent of the server's CPU cannot be seen in jobs/s or in CPU seconds per job; the count
of instructions the server process executes for the same requests barely moves (between runs of
the same code here: 0.05-0.6 % per fetch + ack, 0.4-1.4 % per push). It counts only user-space
work: the kernel's part of each system call is not in it, nor is PostgreSQL's.

Three servers run under callgrind at once, each on a fresh database and with its background loops
idle: one answers nothing, one ``n`` single pushes, one ``n`` single pushes then ``n`` fetches of
one job with an ack each, all from one sequential client. The differences of their totals, over
``n``, are the instructions of one push and of one fetch + ack (start-up and shutdown cancel
out). ``--server-path`` runs another checkout's server code (its ``server`` directory) under the
same client, so two commits compare side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench import report
from bench.httpclient import Connection
from bench.target import DEFAULT_PG, REPO, free_port, fresh_database
from werk.domain.job import FETCH_MAX_COUNT

QUEUE = "bench-instructions"
# Nothing runs on a timer while the requests are counted (maintenance, VACUUM, the long polls'
# fallback check): their instructions would grow with the run's length, not with the requests.
QUIET = {"WERK_MAINTENANCE_INTERVAL": "86400", "WERK_VACUUM_INTERVAL": "0",
         "WERK_POLL_INTERVAL": "86400"}  # fmt: skip
PHASES = ("idle", "push", "push+work")


async def _client(port: int, phase: str, n: int, batch: int, minted: bool, deadline: float) -> None:
    conn = Connection("127.0.0.1", port)
    while True:  # under valgrind the server takes tens of seconds to start
        try:
            await conn.connect()
            status, _ = await conn.request("GET", "/readyz")
            if status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("bench instructions: the server under valgrind did not start")
        await asyncio.sleep(0.5)
    if phase == "idle":
        return
    jobs: list[dict[str, Any]] = [{"jobtype": "noop", "args": [], "queue": QUEUE} for _ in range(n)]
    if not minted:
        for i, job in enumerate(jobs):
            job["jid"] = f"instr-{i:08d}"
    for i in range(0, n, batch):
        if batch == 1:
            await conn.post_json("/v1/jobs", jobs[i], expect=(201,))
        else:
            await conn.post_json("/v1/jobs/batch", {"jobs": jobs[i : i + batch]}, expect=(201,))
    if phase == "push":
        return
    count = min(batch, FETCH_MAX_COUNT)
    fetch = orjson.dumps(
        {"queues": [QUEUE], "wid": "bench-instructions", "count": count, "wait": 0}
    )
    for _ in range(0, n, count):
        fetched = orjson.loads(await conn.post_raw("/v1/fetch", fetch))["jobs"]
        if batch == 1:
            (job,) = fetched
            ack = orjson.dumps({"lease": job["lease"]})
            await conn.post_raw(f"/v1/jobs/{job['jid']}/ack", ack, expect=(204,))
        else:
            acks = [{"jid": j["jid"], "lease": j["lease"]} for j in fetched]
            await conn.post_raw("/v1/ack", orjson.dumps({"acks": acks}), expect=(200,))


def _totals(path: Path) -> int:
    """The instruction total callgrind wrote at exit."""
    match = re.search(r"^(?:summary|totals): (\d+)", path.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"bench instructions: no totals in {path}")
    return int(match.group(1))


async def _count(args: argparse.Namespace, phase: str, workdir: Path) -> int:
    database = await fresh_database(args.database_url, f"werk_instr_{phase.replace('+', '_')}")
    port = free_port()
    out = workdir / f"callgrind.{phase}.out"
    env = {**os.environ, **QUIET}
    if args.server_path:
        env["PYTHONPATH"] = str(Path(args.server_path).resolve())
    cmd = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        sys.executable, "-m", "werk.cli", "serve", "--port", str(port),
        "--database-url", database, "--faktory-port", "0", "--log-level", "warning",
    ]  # fmt: skip
    with open(workdir / f"server.{phase}.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        try:
            await _client(port, phase, args.jobs, args.batch, args.minted, time.monotonic() + 600)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 120)
    return _totals(out)


async def _run(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("bench instructions: needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="werk-instructions-") as tmp:
        counted = await asyncio.gather(*(_count(args, p, Path(tmp)) for p in PHASES))
    totals = dict(zip(PHASES, counted, strict=True))
    n = args.jobs
    per_push = (totals["push"] - totals["idle"]) / n
    per_work = (totals["push+work"] - totals["push"]) / n
    code = args.server_path or str(REPO / "server")
    listed = ", ".join(f"{k} {v:,}" for k, v in totals.items())
    if args.batch == 1:
        kinds = "single push", "fetch 1 + ack"
    else:
        kinds = (
            f"push in batches of {args.batch}",
            f"fetch {min(args.batch, FETCH_MAX_COUNT)} + batch ack",
        )
    print(
        f"instructions  server code {code}  n={n}  per job: {kinds[0]} {per_push:,.0f}  "
        f"{kinds[1]} {per_work:,.0f}  (totals {listed})",
        flush=True,
    )
    result: dict[str, Any] = {
        "harness": "python -m bench " + " ".join(sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git": report.git_state(),
        "server_path": code,
        "valgrind": subprocess.run(
            ["valgrind", "--version"], capture_output=True, text=True, check=False
        ).stdout.strip(),
        "versions": report.versions(),
        "jobs": n,
        "batch": args.batch,
        "minted": args.minted,
        "totals": totals,
        "per_job_push": round(per_push),
        "per_job_fetch_and_ack": round(per_work),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = args.out / f"{stamp}-instructions-{result['git']['commit'][:8]}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"# wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("instructions", help="server instructions per request, under callgrind")
    p.add_argument("--jobs", type=int, default=400, help="requests of each kind (default 400)")
    p.add_argument("--database-url", default=DEFAULT_PG, help="a PostgreSQL server to use")
    p.add_argument(
        "--batch",
        type=int,
        default=1,
        help=f"jobs per push, fetch and ack (default 1; fetches take at most {FETCH_MAX_COUNT})",
    )
    p.add_argument(
        "--minted",
        action="store_true",
        help="push jobs without jids (the server mints them), as bench run's push scenarios do",
    )
    p.add_argument("--server-path", help="another checkout's server/ directory to measure")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")


def main(args: argparse.Namespace) -> None:
    asyncio.run(_run(args))
