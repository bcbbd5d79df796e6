-- Operators' surface (admin API, dashboard, metrics).

-- Browsing a queue (optionally one state) page by page, newest or oldest first, and counting jobs
-- per queue and state (metrics, queue list) from the index alone; enqueued_at is carried so a
-- queue's latency (its oldest available job) needs no heap visit either.
CREATE INDEX werk_jobs_queue_state_idx ON werk_jobs (queue, state, created_at, jid)
    INCLUDE (enqueued_at);
-- Browsing one state across queues (the dashboard's retries, scheduled and dead pages).
CREATE INDEX werk_jobs_state_created_idx ON werk_jobs (state, created_at, jid);

-- Orphaned leases (expired reservations and lost workers), counted like processed/failed so the
-- total survives job deletion and is the same on every node.
ALTER TABLE werk_counters ADD COLUMN leases_expired bigint NOT NULL DEFAULT 0;
