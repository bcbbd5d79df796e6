-- One page of jobs, newest first, matching the filters (NULL = any): $1 state, $2 queue,
-- $3 jobtype, $4 ILIKE pattern on errtype or message, $5 has failed at least once. The page
-- starts after the cursor ($6 created_at, $7 jid; NULL = first page); $8 rows. Keyset paging on
-- (created_at, jid) uses werk_jobs_state_created_idx or werk_jobs_queue_state_idx, so a page costs
-- the same on the first and the thousandth page.
SELECT j.*
FROM werk_jobs j
WHERE ($1::werk_job_state IS NULL OR j.state = $1::werk_job_state)
  AND ($2::text IS NULL OR j.queue = $2::text)
  AND ($3::text IS NULL OR j.jobtype = $3::text)
  AND ($4::text IS NULL OR j.errtype ILIKE $4::text OR j.message ILIKE $4::text)
  AND ($5::boolean IS NULL OR (j.failed_at IS NOT NULL) = $5::boolean)
  AND ($6::timestamptz IS NULL OR (j.created_at, j.jid) < ($6::timestamptz, $7::text))
ORDER BY j.created_at DESC, j.jid DESC
LIMIT $8
