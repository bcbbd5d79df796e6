"""A deliberately plain worker process for the fault suite: speaks the HTTP API directly (so the
suite tests the server, not an SDK), fails over between servers, and records every handler run in
an append-only ledger (one line per completed run, written before the ack).

Job types: ``noop``; ``sleep`` (args[0] seconds); ``poison`` (kills its own process);
``long`` (runs args[0] seconds, extending its lease every args[1] seconds); ``hang`` (on its
first attempt runs args[0] seconds and never extends; later attempts finish at once).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx


class Api:
    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.http = httpx.Client(timeout=httpx.Timeout(10, read=40))

    def post(self, path: str, body: dict) -> httpx.Response:
        """Try each server in turn; transient failures are retried until a deadline."""
        deadline = time.monotonic() + 60
        while True:
            for url in self.urls:
                try:
                    r = self.http.post(url + path, json=body)
                except httpx.TransportError:
                    continue
                if r.status_code not in (502, 503, 504):
                    return r
            if time.monotonic() > deadline:
                raise RuntimeError(f"no server answered {path}")
            time.sleep(0.2)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", action="append", required=True)
    p.add_argument("--wid", required=True)
    p.add_argument("--ledger", required=True)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--beat-interval", type=float, default=0.5)
    args = p.parse_args()

    api = Api(args.url)
    ledger = open(args.ledger, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    lock = threading.Lock()
    stop = threading.Event()
    free = threading.Semaphore(args.concurrency)

    def record(job: dict) -> None:
        with lock:
            ledger.write(f"{job['jid']} {args.wid} {job['attempt']}\n")

    def run(job: dict) -> None:
        try:
            kind, params, lease = job["jobtype"], job["args"], job["lease"]
            if kind == "poison":
                os.kill(os.getpid(), signal.SIGKILL)
            elif kind == "sleep":
                time.sleep(params[0])
            elif kind == "long":
                ends = time.monotonic() + params[0]
                while time.monotonic() < ends:
                    time.sleep(params[1])
                    r = api.post(
                        f"/v1/jobs/{job['jid']}/extend",
                        {"lease": lease, "progress": {"t": time.time()}},
                    )
                    if r.status_code == 409:
                        return  # no longer ours
            elif kind == "hang" and job["attempt"] == 1:
                time.sleep(params[0])
            record(job)
            api.post(f"/v1/jobs/{job['jid']}/ack", {"lease": lease})
        finally:
            free.release()

    def beat() -> None:
        while not stop.is_set():
            try:
                state = api.post("/v1/beat", {"wid": args.wid, "pid": os.getpid()}).json()["state"]
                if state != "running":
                    stop.set()
            except Exception:
                pass
            stop.wait(args.beat_interval)

    # Register before the first fetch: the server tracks (and reaps) only workers that have beaten,
    # so a worker killed before its first beat would leave its jobs to wait out reserve_for.
    api.post("/v1/beat", {"wid": args.wid, "pid": os.getpid()})
    threading.Thread(target=beat, daemon=True).start()
    pool = ThreadPoolExecutor(args.concurrency)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        free.acquire()
        n = 1
        while n < args.concurrency and free.acquire(blocking=False):
            n += 1
        try:
            r = api.post(
                "/v1/fetch",
                {"queues": ["default"], "wid": args.wid, "count": n, "wait": 1},
            )
            jobs = r.json()["jobs"] if r.status_code == 200 else []
        except Exception:
            jobs = []
        for job in jobs:
            pool.submit(run, job)
        for _ in range(n - len(jobs)):
            free.release()
    pool.shutdown(wait=True)


if __name__ == "__main__":
    main()
