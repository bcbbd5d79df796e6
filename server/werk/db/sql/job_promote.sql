-- Make due scheduled jobs (future `at`, or a retry's backoff) available, a bounded batch at a
-- time; SKIP LOCKED lets every node run this without promoting a job twice.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
due AS (
    SELECT j.jid
    FROM werk_jobs j, clock c
    WHERE j.state = 'scheduled' AND j.run_at <= c.now
    ORDER BY j.run_at
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE werk_jobs j
SET state = 'available', enqueued_at = clock.now, seq = nextval('werk_job_seq')
FROM due, clock
WHERE j.jid = due.jid
RETURNING j.queue
