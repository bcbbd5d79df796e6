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
from schemathesis.engine.events import FatalError, NonFatalError, PhaseFinished, ScenarioFinished
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.support.database import TestDatabases
from tests.support.server import ServerProcess
from werk.domain.json_values import INT64, NO_NUL

OPENAPI = Path(__file__).resolve().parents[3] / "openapi" / "openapi.json"
TOKEN = "schemathesis-admin-token"
SEED = 20_261_203
MAX_EXAMPLES = 20
_BULK = ("retry", "kill", "cancel", "delete")


def _config(url: str, secured: bool) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "base-url": url,
            "request-timeout": 10,
            # Without tokens the server asks for none: no Authorization variants to try.
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "checks": {
                "ignored_auth": {"enabled": secured},
                # A body over WERK_MAX_BODY_BYTES is refused before it is read (declared 413).
                "negative_data_rejection": {
                    "expected-statuses": [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 429]
                },
            },
            "operations": [
                *(
                    {
                        # The cursor is opaque: only one the server issued is valid (else 422);
                        # a push's depends_on may name a job neither pushed nor stored, or
                        # form a cycle, which no schema can rule out (422
                        # dependency_not_found, dependency_cycle; and unique beside it).
                        "include-operation-id": operation,
                        "checks": {"positive_data_acceptance": {"expected-statuses": statuses}},
                    }
                    for operation, statuses in (
                        ("admin-jobs-list", ["2xx", 422]),
                        # 404, 409: the batch a push names may not exist or be committed, and
                        # a callback's jid may name a stored job (422).
                        ("jobs-push", ["2xx", 404, 409, 422]),  # 409: not_unique too
                        ("jobs-push-batch", ["2xx", 404, 409, 422]),
                        ("batches-new", ["2xx", 404, 409, 422]),
                    )
                ),
                *(
                    {
                        # /v1/jobs/batch and /v1/jobs/retry are also /v1/jobs/{jid} (a job may
                        # be named "batch"): Allow rightly names GET and DELETE there too.
                        "include-path": path,
                        "checks": {"allow_header_conformance": {"enabled": False}},
                    }
                    for path in ("/v1/jobs/batch", *(f"/v1/jobs/{a}" for a in _BULK))
                ),
            ],
            "generation": {
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "with-security-parameters": secured,
            },
            "phases": {"stateful": {"max-steps": 12}},
        }
    )


def _precise(document: dict[str, Any]) -> dict[str, Any]:
    """The document with args, custom, progress and results as the schema their description
    (JSON_LIMITS) puts in words: recursive, so the document itself keeps it out of generators'
    way."""
    value = {"$ref": "#/components/schemas/JsonValue"}
    obj = {"type": "object", "additionalProperties": value, "propertyNames": {"pattern": NO_NUL}}
    schemas = document["components"]["schemas"]
    schemas["JsonValue"] = {
        "anyOf": [
            {"type": "string", "pattern": NO_NUL},
            {"type": "number", "minimum": -INT64, "maximum": INT64 - 1},
            {"type": "boolean"},
            {"type": "null"},
            {"type": "array", "items": value},
            obj,
        ]
    }
    schemas["JobPush"]["properties"]["args"]["items"] = value
    schemas["JobPush"]["properties"]["custom"].update(obj)
    schemas["Extend"]["properties"]["progress"]["allOf"] = [value]
    for body in ("Ack", "AckItem"):
        schemas[body]["properties"]["result"]["allOf"] = [value]
    return document


@pytest.fixture(scope="module", params=["tokens", "tokenless"])
def werk_schema(
    request: pytest.FixtureRequest,
    test_databases: TestDatabases,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OpenApiSchema]:
    secured = request.param == "tokens"
    document = json.loads(OPENAPI.read_text())
    env = {
        # A long poll answers within the request timeout.
        "WERK_MAX_FETCH_WAIT": "1",
        # The batch limit the document states.
        "WERK_MAX_BATCH": str(
            document["components"]["schemas"]["JobBatchPush"]["properties"]["jobs"]["maxItems"]
        ),
        # The run sends wrong tokens on purpose; blocking this client would hide the rest.
        "WERK_AUTH_FAILURES_PER_MINUTE": "100000",
    }
    if secured:
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        env["WERK_TOKENS"] = json.dumps([{"name": "st", "sha256": digest, "scopes": ["admin"]}])
    name = asyncio.run(test_databases.create())
    server = ServerProcess(test_databases.url(name), tmp_path_factory.mktemp("werk"), env).start()
    try:
        yield schemathesis.openapi.from_dict(
            _precise(document), config=_config(server.url, secured)
        )
    finally:
        server.stop(timeout=15)
        asyncio.run(test_databases.drop(name))


def _findings(schema: OpenApiSchema) -> tuple[list[str], set[str]]:
    """Every failed check (with the curl that reproduces it) and engine error of one run, and
    the phases that ran."""
    found: list[str] = []
    ran: set[str] = set()
    for event in from_schema(schema).execute():
        if isinstance(event, PhaseFinished) and event.status != Status.SKIP:
            ran.add(event.phase.name.value)
        if isinstance(event, ScenarioFinished) and event.status in (Status.FAILURE, Status.ERROR):
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.failure_info is not None:
                        failure = check.failure_info.failure
                        found.append(
                            f"{event.phase.value} {event.label}: {failure.code} {failure.title}: "
                            f"{failure.message}\n    {check.failure_info.code_sample[:2000]}"
                            f"\n    -> {_answer(event.recorder.find_response(case_id=case_id))}"
                        )
        elif isinstance(event, NonFatalError):
            found.append(f"error in {event.label}: {event.info.message}")
        elif isinstance(event, FatalError):
            raise event.exception
    return found, ran


def _answer(response: Any) -> str:
    if response is None:
        return "(no response)"
    return f"{response.status_code} {response.content[:300]!r}"


def test_the_document_tells_the_truth(werk_schema: OpenApiSchema) -> None:
    found, ran = _findings(werk_schema)
    assert {"coverage", "fuzzing", "stateful"} <= ran, ran
    unique = sorted(set(found))
    assert not unique, f"{len(unique)} mismatches:\n" + "\n".join(unique)
