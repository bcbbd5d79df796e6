-- Retry now: dead and scheduled (incl. retrying) jobs matching the filters become available at
-- $8 (NULL = now), queued behind the work already waiting. Filters as in admin_job_list_newest.sql;
-- $6 restricts to these jids (NULL = any), $7 bounds the batch. Returns the changed jobs.
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
      AND j.state IN ('dead', 'scheduled')
    ORDER BY j.created_at, j.jid
    LIMIT $7
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE werk_jobs j
SET state = 'available',
    run_at = c.now,
    enqueued_at = c.now,
    seq = nextval('werk_job_seq'),
    finished_at = NULL
FROM clock c
-- Through an array, so the rows are found by primary key whatever the planner guesses of the
-- target's size (a join on the CTE let it hash-join a scan of the whole table).
WHERE j.jid = ANY (ARRAY(SELECT t.jid FROM target t))
RETURNING j.jid, j.queue
