-- One page of jobs, newest first, matching the filters (NULL = any): $1 state, $2 queue,
-- $3 jobtype, $4 ILIKE pattern on errtype or message, $5 has failed at least once. The page
-- starts after the cursor ($6 created_at, $7 jid; NULL = first page); $8 rows.
-- Keyset paging, so a page costs the same on the first and the thousandth page: jobs that are not
-- active are read newest first per (queue, state) pair (queue_state_pairs.sql) from
-- werk_jobs_queue_state_idx, at most $8 per pair (no index orders a state across queues, nor a
-- queue across states); active jobs, which the index leaves out, are few and read through
-- werk_jobs_active_idx. The newest $8 of those are the page. The bounds are written so that an
-- index can use them in a generic plan too: coalesce, not "$n IS NULL OR".
WITH RECURSIVE /*pairs*/,
candidates AS (
    SELECT k.created_at, k.jid
    FROM pairs p
    CROSS JOIN LATERAL (
        SELECT j.created_at, j.jid
        FROM werk_jobs j
        WHERE j.state <> 'active' AND j.queue = p.queue AND j.state = p.state
          AND (j.created_at, j.jid)
              < (coalesce($6::timestamptz, 'infinity'), coalesce($7::text, ''))
          AND ($3::text IS NULL OR j.jobtype = $3::text)
          AND ($4::text IS NULL OR j.errtype ILIKE $4::text OR j.message ILIKE $4::text)
          AND ($5::boolean IS NULL OR (j.failed_at IS NOT NULL) = $5::boolean)
        ORDER BY j.created_at DESC, j.jid DESC
        LIMIT $8
    ) k
    WHERE $1::werk_job_state IS NULL OR p.state = $1::werk_job_state
    UNION ALL
    SELECT j.created_at, j.jid
    FROM werk_jobs j
    WHERE j.state = 'active' AND ($1::werk_job_state IS NULL OR $1::werk_job_state = 'active')
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND (j.created_at, j.jid) < (coalesce($6::timestamptz, 'infinity'), coalesce($7::text, ''))
      AND ($3::text IS NULL OR j.jobtype = $3::text)
      AND ($4::text IS NULL OR j.errtype ILIKE $4::text OR j.message ILIKE $4::text)
      AND ($5::boolean IS NULL OR (j.failed_at IS NOT NULL) = $5::boolean)
),
page AS (
    SELECT created_at, jid FROM candidates ORDER BY created_at DESC, jid DESC LIMIT $8
)
SELECT j.*
FROM page p
JOIN werk_jobs j ON j.jid = p.jid
ORDER BY p.created_at DESC, p.jid DESC
