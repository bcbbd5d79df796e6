-- FWP's FAIL names only the jid: fail the attempt that worker $3 holds on job $2 (checked under
-- the row lock; any other job is left untouched and no row comes back). The retry policy is
-- werk_failure_outcome() and the backoff werk_retry_delay(), as for every other failure. A
-- failure counts as processed and as failed (Faktory's counters).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
target AS (
    SELECT j.jid, j.queue, j.retry_count,
           werk_failure_outcome(j.retry, j.retry_count + 1, false, j.orphans, 0) AS outcome
    FROM werk_jobs j
    WHERE j.jid = $2 AND j.wid = $3 AND j.state = 'active'
    FOR UPDATE
),
discarded AS (
    DELETE FROM werk_jobs j USING target t
    WHERE j.jid = t.jid AND t.outcome = 'discard'
    RETURNING j.jid
),
failed AS (
    UPDATE werk_jobs j
    SET state = CASE WHEN t.outcome = 'dead' THEN 'dead' ELSE 'scheduled' END::werk_job_state,
        run_at = CASE WHEN t.outcome = 'retry' THEN c.now + werk_retry_delay(t.retry_count)
                      ELSE j.run_at END,
        finished_at = CASE WHEN t.outcome = 'dead' THEN c.now END,
        lease = NULL,
        lease_expires_at = NULL,
        retry_count = j.retry_count + 1,
        failed_at = c.now,
        errtype = $4,
        message = $5,
        error_backtrace = $6::text[]
    FROM target t, clock c
    WHERE j.jid = t.jid AND t.outcome <> 'discard'
    RETURNING j.jid, j.state, j.run_at
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, processed, failed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, t.queue, $7::smallint, 1, 1
    FROM target t CROSS JOIN clock c
    ON CONFLICT (day, queue, shard)
    DO UPDATE SET processed = k.processed + 1, failed = k.failed + 1
)
SELECT t.outcome, f.state, f.run_at
FROM target t LEFT JOIN failed f ON f.jid = t.jid
