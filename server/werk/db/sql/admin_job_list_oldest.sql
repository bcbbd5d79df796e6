-- One page of jobs, oldest first; the filters and the cursor as in admin_job_list_newest.sql.
SELECT j.*
FROM werk_jobs j
WHERE ($1::werk_job_state IS NULL OR j.state = $1::werk_job_state)
  AND ($2::text IS NULL OR j.queue = $2::text)
  AND ($3::text IS NULL OR j.jobtype = $3::text)
  AND ($4::text IS NULL OR j.errtype ILIKE $4::text OR j.message ILIKE $4::text)
  AND ($5::boolean IS NULL OR (j.failed_at IS NOT NULL) = $5::boolean)
  AND ($6::timestamptz IS NULL OR (j.created_at, j.jid) > ($6::timestamptz, $7::text))
ORDER BY j.created_at, j.jid
LIMIT $8
