-- Kill: scheduled, available and active jobs matching the filters go to dead at $8 (NULL = now).
-- An active job loses its lease (its worker's ack or fail gets lease_lost). A job that never
-- failed is marked as killed so the dead list says why it is there. Filters, $6 and $7 as in
-- admin_job_retry.sql. Returns the changed jobs.
WITH clock AS (
    SELECT coalesce($8::timestamptz, now()) AS now
),
target AS (
    SELECT j.jid
    FROM werk_jobs j
    WHERE ($1::werk_job_state IS NULL OR j.state = $1::werk_job_state)
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND ($3::text IS NULL OR j.jobtype = $3::text)
      AND ($4::text IS NULL OR j.errtype ILIKE $4::text OR j.message ILIKE $4::text)
      AND ($5::boolean IS NULL OR (j.failed_at IS NOT NULL) = $5::boolean)
      AND ($6::text[] IS NULL OR j.jid = ANY($6::text[]))
      -- Two terms, each of which an index can serve: werk_jobs_queue_state_idx leaves active
      -- jobs out.
      AND (j.state IN ('scheduled', 'available') OR j.state = 'active')
    ORDER BY j.created_at, j.jid
    LIMIT $7
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE werk_jobs j
SET state = 'dead',
    finished_at = c.now,
    lease = NULL,
    lease_expires_at = NULL,
    failed_at = coalesce(j.failed_at, c.now),
    errtype = coalesce(j.errtype, 'Killed'),
    message = coalesce(j.message, 'killed by an operator')
FROM clock c
-- Through an array, so the rows are found by primary key whatever the planner guesses of the
-- target's size (a join on the CTE let it hash-join a scan of the whole table).
WHERE j.jid = ANY (ARRAY(SELECT t.jid FROM target t))
RETURNING j.jid, j.queue
