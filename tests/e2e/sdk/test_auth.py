"""Bearer tokens: from the argument or WERK_TOKEN, with typed errors for missing scopes."""

from __future__ import annotations

import json

import pytest

from werk_client import Client, Forbidden, JobNotFound, Unauthorized

from .workers import WorkerProcess, wait_for

PUSH = "push-token-0123456789"
WORK = "work-token-0123456789"
ADMIN = "admin-token-0123456789"


def test_tokens_reach_the_server_and_denials_are_typed(werk_server_factory, tmp_path):
    tokens = [
        {"name": "app", "token": PUSH, "scopes": ["push"]},
        {"name": "worker", "token": WORK, "scopes": ["work"]},
        {"name": "ops", "token": ADMIN, "scopes": ["admin"]},
    ]
    server = werk_server_factory(env={"WERK_TOKENS": json.dumps(tokens)})
    with Client(server.url, token="") as anonymous, pytest.raises(Unauthorized) as denied:
        anonymous.push("record", ["x"])
    assert (denied.value.status, denied.value.code) == (401, "unauthorized")
    with Client(server.url, token=PUSH) as producer, Client(server.url, token=ADMIN) as ops:
        job = producer.push("record", ["with-token"])
        with pytest.raises(Forbidden) as forbidden:
            producer.fetch(["default"], wid="nope")
        assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")

        def acked() -> bool:
            try:
                ops.get(job.jid)
            except JobNotFound:
                return True
            return False

        with WorkerProcess(server.url, tmp_path, env={"WERK_TOKEN": WORK}):
            wait_for(acked, timeout=30)
