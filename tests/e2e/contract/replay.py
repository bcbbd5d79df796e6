"""Replays the language-neutral scenarios in client/contract/ over raw HTTP (the wire contract
itself). The TypeScript and Go suites replay the same files through their own clients."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

SCENARIOS = Path(__file__).resolve().parents[3] / "client" / "contract" / "scenarios"
_VAR = re.compile(r"\$\{(\w+)\}")
_DATETIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def scenario_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.json"))


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _VAR.fullmatch(value)
        if whole:
            return variables[whole.group(1)]
        return _VAR.sub(lambda m: str(variables[m.group(1)]), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, variables) for k, v in value.items()}
    return value


def _type_ok(pattern: str, actual: Any) -> bool:
    if pattern.endswith("?"):
        if actual is None:
            return True
        pattern = pattern[:-1]
    checks = {
        "$any": lambda a: True,
        "$string": lambda a: isinstance(a, str),
        "$integer": lambda a: isinstance(a, int) and not isinstance(a, bool),
        "$number": lambda a: isinstance(a, int | float) and not isinstance(a, bool),
        "$boolean": lambda a: isinstance(a, bool),
        "$datetime": lambda a: isinstance(a, str) and bool(_DATETIME.match(a)),
        "$array": lambda a: isinstance(a, list),
        "$object": lambda a: isinstance(a, dict),
    }
    if pattern not in checks:
        raise ValueError(f"unknown pattern {pattern!r}")
    return bool(checks[pattern](actual))


def mismatches(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Where ``actual`` does not match ``expected`` (empty: it matches)."""
    if isinstance(expected, str) and expected.startswith("$"):
        ok = _type_ok(expected, actual)
        return [] if ok else [f"{path}: expected {expected}, got {actual!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        found: list[str] = []
        for key, value in expected.items():
            if key not in actual:
                found.append(f"{path}.{key}: missing")
            else:
                found.extend(mismatches(value, actual[key], f"{path}.{key}"))
        return found
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {len(expected)} items, got {actual!r}"]
        return [m for i, e in enumerate(expected) for m in mismatches(e, actual[i], f"{path}.{i}")]
    if isinstance(expected, bool) or isinstance(actual, bool):
        ok = expected is actual
    else:
        ok = expected == actual
    return [] if ok else [f"{path}: expected {expected!r}, got {actual!r}"]


def request_for(op: str, params: dict[str, Any]) -> tuple[str, str, Any]:
    """(method, path, body) of one operation, per the table in client/contract/README.md."""
    rest = {k: v for k, v in params.items() if k != "jid"}
    jid, queue, wid = params.get("jid"), params.get("queue"), params.get("wid")
    table: dict[str, tuple[str, str, Any]] = {
        "push": ("POST", "/v1/jobs", params),
        "push_many": ("POST", "/v1/jobs/batch", params),
        "get": ("GET", f"/v1/jobs/{jid}", None),
        "info": ("GET", "/v1/info", None),
        "fetch": ("POST", "/v1/fetch", params),
        "ack": ("POST", f"/v1/jobs/{jid}/ack", rest),
        "ack_many": ("POST", "/v1/ack", params),
        "fail": ("POST", f"/v1/jobs/{jid}/fail", rest),
        "extend": ("POST", f"/v1/jobs/{jid}/extend", rest),
        "beat": ("POST", "/v1/beat", params),
        "result": ("GET", f"/v1/jobs/{jid}/result?wait={params.get('wait', 0)}", None),
        "dependencies": ("GET", f"/v1/jobs/{jid}/dependencies", None),
        "batch_new": ("POST", "/v1/batches", params),
        "batch_open": ("POST", f"/v1/batches/{params.get('bid')}/open", {}),
        "batch_commit": ("POST", f"/v1/batches/{params.get('bid')}/commit", {}),
        "batch_status": ("GET", f"/v1/batches/{params.get('bid')}", None),
        "jobs_list": ("GET", f"/v1/jobs?{urlencode(params)}", None),
        "job_retry": ("POST", f"/v1/jobs/{jid}/retry", None),
        "job_kill": ("POST", f"/v1/jobs/{jid}/kill", None),
        "job_cancel": ("POST", f"/v1/jobs/{jid}/cancel", None),
        "job_delete": ("DELETE", f"/v1/jobs/{jid}", None),
        "jobs_retry": ("POST", "/v1/jobs/retry", params),
        "jobs_kill": ("POST", "/v1/jobs/kill", params),
        "jobs_cancel": ("POST", "/v1/jobs/cancel", params),
        "jobs_delete": ("POST", "/v1/jobs/delete", params),
        "queues_list": ("GET", "/v1/queues", None),
        "queue_get": ("GET", f"/v1/queues/{queue}", None),
        "queue_pause": ("POST", f"/v1/queues/{queue}/pause", None),
        "queue_resume": ("POST", f"/v1/queues/{queue}/resume", None),
        "queue_clear": ("DELETE", f"/v1/queues/{queue}/jobs", None),
        "workers_list": ("GET", "/v1/workers", None),
        "worker_quiet": ("POST", f"/v1/workers/{wid}/quiet", None),
        "worker_terminate": ("POST", f"/v1/workers/{wid}/terminate", None),
        "history": ("GET", f"/v1/history?{urlencode(params)}", None),
        "batches_list": ("GET", f"/v1/batches?{urlencode(params)}", None),
    }
    return table[op]


def lookup(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def replay(http: httpx.Client, scenario: dict[str, Any]) -> None:
    variables: dict[str, Any] = {"run": secrets.token_hex(4)}
    for number, step in enumerate(scenario["steps"]):
        where = f"{scenario['name']} step {number} ({step['op']})"
        params = substitute(step.get("params", {}), variables)
        expect = substitute(step["expect"], variables)
        method, path, body = request_for(step["op"], params)
        response = http.request(method, path, json=body)
        payload = json.loads(response.content) if response.content else None
        if "error" in expect:
            assert response.headers["content-type"] == "application/problem+json", where
            errs = mismatches(expect["error"], payload)
            assert not errs, f"{where}: {errs}; body {payload}"
            assert response.status_code == expect["error"]["status"], where
            continue
        status = response.status_code
        assert status == expect["status"], f"{where}: {status} {payload}"
        errs = mismatches(expect["result"], payload)
        assert not errs, f"{where}: {errs}"
        for name, dotted in step.get("save", {}).items():
            variables[name] = lookup(payload, dotted)
