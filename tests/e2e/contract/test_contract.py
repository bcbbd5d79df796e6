"""The client contract (client/contract/scenarios/*.json) replayed over raw HTTP against a real
server: the wire behaviour every SDK's own replay must also see."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.e2e.contract import openapi_check
from tests.e2e.contract.openapi_check import DocumentedAnswers
from tests.e2e.contract.replay import mismatches, replay, scenario_files
from tests.support.server import ServerProcess


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario(shared_werk: ServerProcess, path: Path) -> None:
    """Every answer the replay sees is also checked against openapi/openapi.json."""
    scenario = json.loads(path.read_text())
    documented = DocumentedAnswers()
    hooks = {"response": [documented]}
    with httpx.Client(base_url=shared_werk.url, timeout=30, event_hooks=hooks) as http:
        replay(http, scenario)
    assert documented.seen == len(scenario["steps"])
    assert not documented.problems, documented.problems


def test_the_document_check_rejects_what_it_should() -> None:
    def answer(method: str, path: str, status: int, body: bytes, kind: str) -> httpx.Response:
        request = httpx.Request(method, "http://werk" + path)
        return httpx.Response(status, content=body, headers={"content-type": kind}, request=request)

    problem = b'{"type":"t","title":"t","status":404,"detail":"d","code":"job_not_found"}'
    assert not openapi_check.mismatches(
        answer("GET", "/v1/jobs/abcdefgh", 404, problem, "application/problem+json")
    )
    assert openapi_check.mismatches(
        answer("GET", "/v1/jobs/abcdefgh", 404, problem, "application/json")
    )
    assert openapi_check.mismatches(
        answer("GET", "/v1/jobs/abcdefgh", 404, b'{"code":1}', "application/problem+json")
    )
    assert openapi_check.mismatches(answer("GET", "/v1/jobs/abcdefgh", 418, b"", "text/plain"))
    assert openapi_check.mismatches(
        answer("POST", "/v1/beat", 200, b'{"state":"asleep"}', "application/json")
    )
    assert not openapi_check.mismatches(
        answer("POST", "/v1/beat", 200, b'{"state":"running"}', "application/json")
    )


def test_there_are_scenarios_for_every_operation() -> None:
    ops = {s["op"] for p in scenario_files() for s in json.loads(p.read_text())["steps"]}
    assert ops == {
        "push", "push_many", "get", "info", "fetch", "ack", "ack_many", "fail", "extend", "beat",
        "result", "dependencies", "batch_new", "batch_open", "batch_commit", "batch_status",
        "jobs_list", "job_retry", "job_kill", "job_cancel", "job_delete", "jobs_retry", "jobs_kill",
        "jobs_cancel", "jobs_delete", "queues_list", "queue_get", "queue_pause", "queue_resume",
        "queue_clear", "workers_list", "worker_quiet", "worker_terminate", "history",
        "batches_list",
    }  # fmt: skip


def test_the_matcher_rejects_what_it_should() -> None:
    assert mismatches({"a": "$integer"}, {"a": True})
    assert mismatches({"a": 1}, {"b": 1})
    assert mismatches([1], [1, 2])
    assert mismatches("$datetime", "2030-01-01T09:00:00")
    assert not mismatches("$datetime?", None)
    assert not mismatches({"a": [{"b": "$string"}]}, {"a": [{"b": "x", "c": 1}], "d": 2})
