"""A worker process for the exactly-once test: per job, one transaction of the application's
database inserts the job's side effect (a row in ``effects``) and acks the job
(``werk_client.transactional_ack``). The test kills it with SIGKILL at random points."""

from __future__ import annotations

import argparse
import os
import time

import psycopg

import werk_client


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--dsn", required=True)
    p.add_argument("--wid", required=True)
    p.add_argument("--seconds", type=float, default=300)
    args = p.parse_args()
    client = werk_client.Client(args.url)
    deadline = time.monotonic() + args.seconds
    with psycopg.connect(args.dsn) as conn:
        while time.monotonic() < deadline:  # bounded: the test stops it long before
            # A beat each round: a killed worker stops beating, and the server releases its
            # leases once WERK_WORKER_TIMEOUT passes.
            client.beat(args.wid, pid=os.getpid())
            for job in client.fetch(["default"], wid=args.wid, count=10, wait=1):
                try:
                    with werk_client.transactional_ack(conn, job):
                        conn.execute(
                            "INSERT INTO effects (jid, wid) VALUES (%s, %s)", (job.jid, args.wid)
                        )
                except werk_client.LeaseLost:
                    continue  # rolled back: whoever holds the job now applies it


if __name__ == "__main__":
    main()
