"""Schemathesis against a real `werk serve`, with tokens and without: every operation of the
committed openapi/openapi.json with valid and invalid input, then chains of calls (the stateful
phase). It fails on any server error, any status or content type the document does not
declare, and any response that does not match its schema. Seeded and bounded."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.engine import Status, from_schema
from schemathesis.engine.events import EngineFinished, FatalError, NonFatalError, ScenarioFinished
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.support.database import TestDatabases
from tests.support.server import ServerProcess

OPENAPI = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
TOKEN = "schemathesis-admin-token"
SEED = 20_261_203
MAX_EXAMPLES = 12


def _config(url: str, secured: bool) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "base-url": url,
            "request-timeout": 10,
            # Without tokens the server asks for none: no Authorization variants to try.
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "checks": {"ignored_auth": {"enabled": secured}},
            "generation": {
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "with-security-parameters": secured,
            },
            "phases": {"stateful": {"max-steps": 12}},
        }
    )


@pytest.fixture(scope="module", params=["tokens", "tokenless"])
def werk_schema(
    request: pytest.FixtureRequest,
    test_databases: TestDatabases,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OpenApiSchema]:
    secured = request.param == "tokens"
    env = {
        # A long poll answers within the request timeout.
        "WERK_MAX_FETCH_WAIT": "1",
        "WERK_AUTH_FAILURES_PER_MINUTE": "100000",
    }
    if secured:
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        env["WERK_TOKENS"] = json.dumps([{"name": "st", "sha256": digest, "scopes": ["admin"]}])
    name = asyncio.run(test_databases.create())
    server = ServerProcess(test_databases.url(name), tmp_path_factory.mktemp("werk"), env).start()
    try:
        yield schemathesis.openapi.from_path(OPENAPI, config=_config(server.url, secured))
    finally:
        server.stop(timeout=15)
        asyncio.run(test_databases.drop(name))


def _findings(schema: OpenApiSchema) -> tuple[list[str], Any]:
    """Every failed check (with the curl that reproduces it) and engine error of one run."""
    found: list[str] = []
    finished = None
    for event in from_schema(schema).execute():
        if isinstance(event, ScenarioFinished) and event.status in (Status.FAILURE, Status.ERROR):
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.failure_info is not None:
                        failure = check.failure_info.failure
                        found.append(
                            f"{event.phase.value} {event.label}: {failure.code} {failure.title}: "
                            f"{failure.message}\n    {check.failure_info.code_sample}"
                        )
        elif isinstance(event, NonFatalError):
            found.append(f"error in {event.label}: {event.info.message}")
        elif isinstance(event, FatalError):
            raise event.exception
        elif isinstance(event, EngineFinished):
            finished = event
    return found, finished


def test_the_document_tells_the_truth(werk_schema: OpenApiSchema) -> None:
    found, finished = _findings(werk_schema)
    assert finished is not None
    unique = sorted(set(found))
    assert not unique, f"{len(unique)} mismatches:\n" + "\n".join(unique)
