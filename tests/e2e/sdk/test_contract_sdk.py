"""The language-neutral client contract (client/contract/scenarios) replayed through ``Client``.

The raw-HTTP replay in tests/e2e/contract checks the wire; this one checks that the SDK's methods,
typed results and typed errors express exactly the same behaviour.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.contract.replay import lookup, mismatches, scenario_files, substitute
from werk_client import AsyncClient, Client, WerkError


def as_json(value: Any) -> Any:
    """A typed result back in its wire shape, for the scenario's matcher."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):  # the server writes UTC with a Z
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


def call(client: Any, op: str, params: dict[str, Any]) -> Any:
    p = dict(params)
    if op == "push":
        return client.push(p.pop("jobtype"), **p)
    if op == "push_many":
        return client.push_many(p["jobs"])
    if op == "get":
        return client.get(p["jid"])
    if op == "info":
        return client.info()
    if op == "fetch":
        return {"jobs": client.fetch(p.pop("queues"), **p)}  # the SDK returns the list
    if op == "ack":
        return client.ack(p["jid"], p["lease"], result=p.get("result"))
    if op == "ack_many":
        return client.ack_many([(a["jid"], a["lease"], a.get("result")) for a in p["acks"]])
    if op == "result":
        return client.result(p["jid"], wait=p.get("wait", 0))
    if op == "dependencies":
        return {"dependencies": client.dependencies(p["jid"]), "next": None}  # every page
    if op == "fail":
        return client.fail(p.pop("jid"), p.pop("lease"), **p)
    if op == "extend":
        return client.extend(p.pop("jid"), p.pop("lease"), **p)
    if op == "beat":
        return {"state": client.beat(p.pop("wid"), **p)}  # the SDK returns the state
    if op == "batch_new":
        return client.create_batch(**p)
    if op == "batch_open":
        return client.reopen_batch(p["bid"])
    if op == "batch_commit":
        return client.commit_batch(p["bid"])
    if op == "batch_status":
        return client.batch_status(p["bid"])
    return admin_call(client, op, p)


def admin_call(client: Any, op: str, p: dict[str, Any]) -> Any:
    """The admin ops; an answer the SDK gives as a list, a count or a state is wrapped back
    into its wire shape, as client/contract/README.md says."""
    verb, _, noun = op.partition("_")
    if op == "jobs_list":
        return client.list_jobs(**p)
    if verb == "job":
        return getattr(client, f"{noun}_job")(p["jid"])
    if verb == "jobs":
        return getattr(client, f"{noun}_jobs")(**p)
    if op == "queues_list":
        return {"queues": client.list_queues()}
    if op == "queue_get":
        return client.queue(p["queue"])
    if op == "queue_clear":
        return {"queue": p["queue"], "deleted": client.clear_queue(p["queue"])}
    if verb == "queue":
        return getattr(client, f"{noun}_queue")(p["queue"])
    if op == "workers_list":
        return {"workers": client.list_workers(**p)}
    if verb == "worker":
        return {"wid": p["wid"], "state": getattr(client, f"{noun}_worker")(p["wid"])}
    if op == "history":
        return {"days": client.history(**p)}
    if op == "batches_list":
        return client.list_batches(**p)
    raise AssertionError(f"unknown op {op}")


class _Blocking:
    """``AsyncClient`` driven from this synchronous test, one loop for the whole scenario."""

    def __init__(self, url: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = AsyncClient(url, timeout=30)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        return lambda *args, **kwargs: self._loop.run_until_complete(method(*args, **kwargs))

    def close(self) -> None:
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: p.stem)
def test_scenario_through_the_sdk(shared_werk, path: Path, kind: str) -> None:
    scenario = json.loads(path.read_text())
    variables: dict[str, Any] = {"run": secrets.token_hex(4)}
    client: Any = (
        Client(shared_werk.url, timeout=30) if kind == "Client" else _Blocking(shared_werk.url)
    )
    try:
        for number, step in enumerate(scenario["steps"]):
            where = f"{scenario['name']} step {number} ({step['op']})"
            params = substitute(step.get("params", {}), variables)
            expect = substitute(step["expect"], variables)
            try:
                result = as_json(call(client, step["op"], params))
            except WerkError as exc:
                assert "error" in expect, f"{where}: unexpected {exc!r}"
                got = {"status": exc.status, "code": exc.code, "errors": exc.errors}
                errs = mismatches(expect["error"], got)
                assert not errs, f"{where}: {errs}; {exc}"
                continue
            assert "error" not in expect, f"{where}: expected an error, got {result}"
            errs = mismatches(expect["result"], result)
            assert not errs, f"{where}: {errs}"
            for name, dotted in step.get("save", {}).items():
                variables[name] = lookup(result, dotted)
    finally:
        client.close()
