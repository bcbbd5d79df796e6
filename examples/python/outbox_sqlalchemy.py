"""The outbox pattern with SQLAlchemy: the job is pushed in the session's transaction, and
completed in the transaction that records its effect (werk.ack returns false when the lease
was lost: raise, and the effect is rolled back with it).

    WERK_URL=http://127.0.0.1:7420 DATABASE_URL=postgresql+psycopg://app@db/shop \
        python outbox_sqlalchemy.py
"""

from __future__ import annotations

import json
import os

from sqlalchemy import create_engine, text

import werk_client


def main() -> None:
    client = werk_client.Client(os.environ["WERK_URL"])
    engine = create_engine(os.environ["DATABASE_URL"])
    with engine.begin() as db:
        db.execute(text("CREATE TABLE IF NOT EXISTS signups (id serial PRIMARY KEY, name text)"))
        db.execute(text("CREATE TABLE IF NOT EXISTS welcomes (signup_id int PRIMARY KEY)"))

    with engine.begin() as db:  # one transaction: the signup and its job, or neither
        signup_id = db.execute(
            text("INSERT INTO signups (name) VALUES (:name) RETURNING id"), {"name": "Ada"}
        ).scalar_one()
        db.execute(
            text("SELECT werk.push('welcome', CAST(:args AS jsonb), CAST(:opts AS jsonb))"),
            {"args": json.dumps([signup_id]), "opts": json.dumps({"queue": "welcome"})},
        )

    (job,) = client.fetch(["welcome"], wid="example-sqlalchemy", wait=5)
    with engine.begin() as db:
        db.execute(text("INSERT INTO welcomes (signup_id) VALUES (:id)"), {"id": job.args[0]})
        acked = db.execute(
            text("SELECT werk.ack(:jid, :lease)"), {"jid": job.jid, "lease": job.lease}
        ).scalar_one()
        if not acked:
            raise werk_client.LeaseLost(f"job {job.jid}: lease lost; the welcome is rolled back")
    print(f"signup {signup_id}: welcome recorded, job {job.jid} acked")


if __name__ == "__main__":
    main()
