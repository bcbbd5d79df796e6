"""A server restart under a running worker and client: retried, logged, nothing lost."""

from __future__ import annotations

import time

import pytest

from tests.support.server import ServerProcess
from werk_client import Client, JobNotFound, RetryPolicy, Unavailable

from .workers import WorkerProcess, lines, wait_for


def _gone(client: Client, jid: str) -> bool:
    try:
        client.get(jid)
    except JobNotFound:
        return True
    return False


def _restart_on_same_port(old: ServerProcess, log_dir) -> ServerProcess:
    new = ServerProcess(old.database_url, log_dir, {"WERK_PORT": str(old.port)})
    new.port, new.url = old.port, old.url
    return new.start()


def test_worker_and_client_ride_out_a_server_restart(werk_server, tmp_path):
    with Client(werk_server.url) as client:
        before = [client.push("record", [f"b{i}"]) for i in range(5)]
        with WorkerProcess(werk_server.url, tmp_path) as worker:
            wait_for(lambda: all(_gone(client, j.jid) for j in before), timeout=30)
            werk_server.kill()
            quick = Client(werk_server.url, retry=RetryPolicy(attempts=3, base=0.05, cap=0.1))
            with quick, pytest.raises(Unavailable):
                quick.push("record", ["never"])
            wait_for(lambda: "fetch failed" in worker.log, timeout=20)
            time.sleep(1)
            restarted = _restart_on_same_port(werk_server, tmp_path)
            try:
                after = [client.push("record", [f"a{i}"]) for i in range(5)]
                wait_for(lambda: all(_gone(client, j.jid) for j in after), timeout=60)
                assert worker.process is not None and worker.process.poll() is None
            finally:
                worker.stop()
                restarted.stop()
        tokens = sorted(line.split()[0] for line in lines(tmp_path, "done.txt"))
        assert tokens == sorted([f"b{i}" for i in range(5)] + [f"a{i}" for i in range(5)])
