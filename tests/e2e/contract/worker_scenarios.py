"""Replays client/contract/workers/scenarios.json against each SDK's contract worker process.

Every SDK ships a small worker program registering the same handlers (see the contract README,
"Worker scenarios"); a scenario starts it with its settings, pushes jobs through the Python
client, and checks what the server then holds for each job. The outcomes per SDK and scenario
feed the parity table (``parity``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from werk_client import Client, JobNotFound

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "client" / "contract" / "workers" / "scenarios.json"
SDKS = ("python", "typescript", "go")


def scenarios() -> list[dict[str, Any]]:
    return list(json.loads(SCENARIOS.read_text()))


@dataclass
class Program:
    """How to start one SDK's contract worker."""

    argv: list[str]
    env: dict[str, str]


def programs(go_env: Callable[[], dict[str, str]], node: Callable[[], str]) -> dict[str, Program]:
    """Each SDK's contract worker (built first where needed); toolchain lookups skip loudly."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("WERK_")}
    out = {
        "python": Program(
            [sys.executable, str(ROOT / "client/contract/workers/python_worker.py")], base
        )
    }
    out["typescript"] = Program(
        [node(), str(ROOT / "client/contract/workers/node_worker.mjs")], base
    )
    env = go_env()
    binary = ROOT / "client" / "go" / ".cache" / "bin" / "werk-contract-worker"
    subprocess.run(
        ["go", "build", "-o", str(binary), "./cmd/werk-contract-worker"],
        cwd=ROOT / "client" / "go", env=env, check=True, timeout=240, capture_output=True,
    )  # fmt: skip
    out["go"] = Program([str(binary)], env)
    return out


def _state(client: Client, jid: str) -> dict[str, Any]:
    """What the server holds for the job: its state, failure, and result if completed."""
    try:
        job = client.get(jid)
    except JobNotFound:
        return {"state": "gone"}
    seen: dict[str, Any] = {"state": job.state}
    if job.failure is not None:
        seen["errtype"] = job.failure.errtype
        if job.failure.next_at is not None:
            seen["retry_in"] = (job.failure.next_at - datetime.now(UTC)).total_seconds()
    if job.state == "completed":
        seen["result"] = client.result(jid).result
    return seen


def _matches(expect: dict[str, Any], seen: dict[str, Any]) -> bool:
    for key, value in expect.items():
        if key == "state_in":  # e.g. failed to retry: scheduled, or already due again
            if seen["state"] not in value:
                return False
        elif key == "failed":
            if ("errtype" in seen) != value:
                return False
        elif key == "retry_in_about":
            if not value * 0.9 <= seen.get("retry_in", -1) <= value:
                return False
        elif key == "due_within":  # retried at once, not after the backoff
            if seen["state"] != "available" and seen.get("retry_in", value + 1) > value:
                return False
        elif seen.get(key) != value:
            return False
    return True


def replay(program: Program, url: str, scenario: dict[str, Any], workdir: Path) -> str | None:
    """None if the SDK's worker behaved as the scenario expects, else what went wrong."""
    run = uuid.uuid4().hex[:8]
    queues = [f"wc-{scenario['name']}-{q}-{run}" for q in scenario.get("queues", ["q"])]
    by_name = dict(zip(scenario.get("queues", ["q"]), queues, strict=True))
    settings = dict(scenario.get("worker", {}))
    if "WEIGHTS" in settings:
        settings["WEIGHTS"] = json.dumps({by_name[q]: w for q, w in settings["WEIGHTS"].items()})
    env = {**program.env, **settings, "WERK_URL": url, "QUEUES": ",".join(queues)}
    log = workdir / f"{scenario['name']}-{run}.log"
    jids: dict[str, list[str]] = {}

    def push(client: Client) -> None:
        for spec in scenario["jobs"]:
            for _ in range(spec.get("count", 1)):
                job = client.push(
                    spec["jobtype"],
                    spec.get("args", []),
                    queue=by_name[spec.get("queue", "q")],
                    retry=spec.get("retry"),
                    custom=spec.get("custom"),
                    keep_result_for=600,
                )
                jids.setdefault(spec["key"], []).append(job.jid)

    with Client(url) as client, log.open("wb") as out:
        if not scenario.get("start_after_push"):
            proc = subprocess.Popen(program.argv, env=env, stdout=out, stderr=subprocess.STDOUT)
            push(client)
        else:
            push(client)
            proc = subprocess.Popen(program.argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            return _observe(client, scenario, jids, proc)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _observe(
    client: Client,
    scenario: dict[str, Any],
    jids: dict[str, list[str]],
    proc: subprocess.Popen[bytes],
) -> str | None:
    within = float(scenario.get("within", 20))
    started = time.monotonic()
    if scenario.get("sigterm_when_started"):
        every = [jid for group in jids.values() for jid in group]
        while not all(_state(client, j)["state"] == "active" for j in every):
            if time.monotonic() - started > within:
                return "the jobs never all started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        if proc.wait(20) != 0:
            return f"the worker exited with {proc.returncode} after SIGTERM"
    if "check" in scenario:
        return _check_order(client, scenario["check"], jids, started + within)
    seen: dict[str, dict[str, Any]] = {}
    while time.monotonic() - started < within:
        seen = {key: _state(client, group[0]) for key, group in jids.items()}
        if all(_matches(scenario["expect"][key], seen[key]) for key in scenario["expect"]):
            return None
        time.sleep(0.1)
    return f"expected {scenario['expect']}, saw {seen}"


def _check_order(
    client: Client, check: str, jids: dict[str, list[str]], deadline: float
) -> str | None:
    every = [jid for group in jids.values() for jid in group]
    while any(_state(client, j)["state"] != "completed" for j in every):
        if time.monotonic() > deadline:
            return "not every job completed"
        time.sleep(0.1)
    first = [client.result(j).result for j in jids["f"]]
    second = [client.result(j).result for j in jids["s"]]
    if check == "first_before_second" and not max(first) < min(second):
        return f"strict order broken: first {first}, second {second}"
    if check == "interleaved" and max(first) < min(second):
        return f"weighted order never drew the second queue first: first {first}, second {second}"
    return None
