-- Make due scheduled jobs (future `at`, or a retry's backoff) available, a bounded batch at a
-- time; SKIP LOCKED lets every node run this without promoting a job twice.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
due AS (
    SELECT j.jid
    FROM werk_jobs j
    -- The clock spelled out, so it bounds the index scan: compared with a CTE's value it is only
    -- a filter, and each pass (once a second on every node) read every scheduled job.
    WHERE j.state = 'scheduled' AND j.run_at <= coalesce($1::timestamptz, now())
    ORDER BY j.run_at
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE werk_jobs j
SET state = 'available', enqueued_at = clock.now, seq = nextval('werk_job_seq')
FROM due, clock
WHERE j.jid = due.jid
RETURNING j.queue
