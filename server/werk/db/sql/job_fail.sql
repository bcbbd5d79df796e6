-- A worker reports that its attempt failed. It must hold the attempt (checked under the row
-- lock): by its current lease ($3), or, for Faktory's protocol whose FAIL names only the jid, as
-- the worker $10 the job is reserved to (lease NULL). The retry policy lives in werk_failure_outcome(); a retry_in ($7) overrides the backoff.
-- The retry time is capped at $11, the latest time Werk can read back (a backoff of a thousand
-- retries is 30,000 years).
-- A failure counts as processed and as failed (Faktory's counters).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
target AS (
    SELECT j.jid, j.queue, j.retry_count,
           werk_failure_outcome(j.retry, j.retry_count + 1, $8::boolean, j.orphans, 0) AS outcome
    FROM werk_jobs j
    -- (Only an active job holds a lease: werk_jobs_lease_iff_active. See job_ack.sql for why
    -- the state is not named.)
    WHERE j.jid = $2 AND j.lease IS NOT NULL
      AND (j.lease = $3::uuid OR ($3::uuid IS NULL AND j.wid = $10::text))
    FOR UPDATE
),
/*discarded*/
failed AS (
    UPDATE werk_jobs j
    SET state = CASE WHEN t.outcome = 'dead' THEN 'dead' ELSE 'scheduled' END::werk_job_state,
        run_at = CASE WHEN t.outcome = 'retry'
                      THEN least(c.now + coalesce(make_interval(secs => $7::float8),
                                                  werk_retry_delay(t.retry_count)),
                                 $11::timestamptz)
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
    RETURNING j.jid, j.state, j.run_at, j.dependents, j.dependencies, j.batch, j.finished_at
),
/*noted*/
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, processed, failed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, t.queue, $9::smallint, 1, 1
    FROM target t CROSS JOIN clock c
    ON CONFLICT (day, queue, shard)
    DO UPDATE SET processed = k.processed + 1, failed = k.failed + 1
)
SELECT t.outcome, f.state, f.run_at
FROM target t LEFT JOIN failed f ON f.jid = t.jid
