"""The outbox pattern with psycopg 3: an order and the job that mails its receipt are written in
one transaction; then a worker applies the job's effect and acks it in one transaction.

    WERK_URL=http://127.0.0.1:7420 DATABASE_URL=postgresql://app@db/shop python outbox_psycopg.py

DATABASE_URL's role needs werk_app (GRANT werk_app TO app) and its own tables.
"""

from __future__ import annotations

import os

import psycopg
from psycopg.types.json import Jsonb

import werk_client


def main() -> None:
    client = werk_client.Client(os.environ["WERK_URL"])
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text)")
        conn.execute("CREATE TABLE IF NOT EXISTS receipts (order_id int PRIMARY KEY)")
        conn.commit()

        # Enqueue inside the business transaction: the job exists if and only if the order does.
        with conn.transaction():
            order_id = conn.execute(
                "INSERT INTO orders (email) VALUES (%s) RETURNING id", ("ada@example.com",)
            ).fetchone()[0]
            conn.execute(
                "SELECT werk.push('send_receipt', %s, %s)",
                (Jsonb([order_id]), Jsonb({"queue": "mail"})),
            )

        # Complete inside the side effect's transaction: exactly once.
        (job,) = client.fetch(["mail"], wid="example-psycopg", wait=5)
        with werk_client.transactional_ack(conn, job):
            conn.execute("INSERT INTO receipts (order_id) VALUES (%s)", (job.args[0],))
        print(f"order {order_id}: receipt recorded, job {job.jid} acked")


if __name__ == "__main__":
    main()
