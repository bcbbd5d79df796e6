"""Faktory Enterprise's unique jobs over FWP with the real PyPI `faktory` client against
`werk serve` (the raw commands: tests/integration/faktory/test_unique_expiry.py)."""

from __future__ import annotations

import httpx
import pytest

faktory = pytest.importorskip(
    "faktory",
    reason="Python client tests SKIPPED: PyPI `faktory` is missing; install the dev extras: "
    ".venv/bin/uv pip install --python .venv/bin/python -r requirements.lock",
)


def test_the_python_client_meets_notunique(fwp_server):
    url = fwp_server.faktory_url()
    custom = {"unique_for": 600}
    with faktory.Client(faktory=url) as client:
        assert client.queue("report", args=[1], queue="u", jid="uniq-0001", custom=custom)
        # A second push of the same job is refused: the client reports False.
        assert not client.queue("report", args=[1], queue="u", jid="uniq-0002", custom=custom)
        # The refusal is Faktory's NOTUNIQUE, naming the job that holds the lock.
        client.faktory.reply(
            "PUSH",
            {"jid": "uniq-0003", "jobtype": "report", "args": [1.0], "queue": "u",
             "custom": custom},
        )  # fmt: skip
        reply = next(client.faktory.get_message())
        assert reply.startswith("NOTUNIQUE ") and "uniq-0001" in reply
        assert client.queue("report", args=[2], queue="u", jid="uniq-0004", custom=custom)
    jobs = httpx.get(f"{fwp_server.url}/v1/jobs", params={"queue": "u"}).json()["jobs"]
    assert sorted(j["jid"] for j in jobs) == ["uniq-0001", "uniq-0004"]
    stored = httpx.get(f"{fwp_server.url}/v1/jobs/uniq-0001").json()
    assert stored["unique"]["for"] == 600 and stored["unique"]["until"] == "success"
