"""The least server a push over HTTP can have on Werk's stack, for the `floor` scenario.

uvicorn (httptools, uvloop, as `werk serve` runs it) in front of a bare ASGI app: the body is
decoded by msgspec and the job stored by one plain INSERT into werk_jobs on one asyncpg
connection, answered with 201 and what was stored. Nothing else: no auth, no limits, no checks
beyond the schema's, no coalescing, no counters, no wake-ups. One push at a time, its rate is
the most a server on this stack reaches on this machine with Werk's table, and the gap to
`werk serve` in the same sitting is what everything else Werk does for a push costs.

Run by the harness: ``python -m bench.least_server --port P --database-url URL``.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import asyncpg
import msgspec
import uvicorn

from bench.target import REPO, Target, free_port
from werk.domain.jids import new_jids

INSERT = (
    "INSERT INTO werk_jobs (jid, jobtype, queue, args, state, run_at, created_at, enqueued_at) "
    "VALUES ($1, $2, $3, $4::jsonb, 'available', now(), now(), now()) RETURNING created_at"
)


class _Push(msgspec.Struct):
    jobtype: str
    args: msgspec.Raw = msgspec.Raw(b"[]")
    queue: str = "default"
    jid: str | None = None


def app_for(database_url: str) -> Any:
    decode = msgspec.json.Decoder(_Push).decode
    encode = msgspec.json.Encoder().encode
    conn: asyncpg.Connection | None = None

    async def respond(send: Any, status: int, body: bytes) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal conn
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                conn = await asyncpg.connect(database_url)
                await send({"type": "lifespan.startup.complete"})
            if conn is not None:
                await conn.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["method"] != "POST":  # the harness's readiness check
            await respond(send, 200, b"{}")
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        job = decode(body)
        jid = job.jid or new_jids(1)[0]
        assert conn is not None
        created = await conn.fetchval(INSERT, jid, job.jobtype, job.queue, bytes(job.args).decode())
        stored = {"jid": jid, "jobtype": job.jobtype, "queue": job.queue, "state": "available",
                  "created_at": created}  # fmt: skip
        await respond(send, 201, encode(stored))

    return app


@contextlib.contextmanager
def started(database_url: str, pg_uid: int | None) -> Iterator[Target]:
    """The least server on a free port, against ``database_url``, while the block runs."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench.least_server", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--database-url", database_url], cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("bench: the least server did not start")
            try:
                with urllib.request.urlopen(url, timeout=2):
                    break
            except OSError:
                time.sleep(0.1)
        yield Target(url=url, database_url=database_url, pid=proc.pid, pg_uid=pg_uid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.least_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    a = parser.parse_args()
    uvicorn.run(
        app_for(a.database_url),
        host="127.0.0.1",
        port=a.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
