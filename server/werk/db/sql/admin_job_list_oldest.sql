-- One page of jobs, oldest first; the filters, the cursor and the plan as in
-- admin_job_list_newest.sql.
WITH RECURSIVE /*pairs*/,
candidates AS (
    SELECT k.created_at, k.jid
    FROM pairs p
    CROSS JOIN LATERAL (
        SELECT j.created_at, j.jid
        FROM werk_jobs j
        WHERE j.state <> 'active' AND j.queue = p.queue AND j.state = p.state
          AND (j.created_at, j.jid)
              > (coalesce($6::timestamptz, '-infinity'), coalesce($7::text, ''))
          AND ($3::text IS NULL OR j.jobtype = $3::text)
          AND ($4::text IS NULL OR j.errtype ILIKE $4::text OR j.message ILIKE $4::text)
          AND ($5::boolean IS NULL OR (j.failed_at IS NOT NULL) = $5::boolean)
        ORDER BY j.created_at, j.jid
        LIMIT $8
    ) k
    WHERE $1::werk_job_state IS NULL OR p.state = $1::werk_job_state
    UNION ALL
    SELECT j.created_at, j.jid
    FROM werk_jobs j
    WHERE j.state = 'active' AND ($1::werk_job_state IS NULL OR $1::werk_job_state = 'active')
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND (j.created_at, j.jid) > (coalesce($6::timestamptz, '-infinity'), coalesce($7::text, ''))
      AND ($3::text IS NULL OR j.jobtype = $3::text)
      AND ($4::text IS NULL OR j.errtype ILIKE $4::text OR j.message ILIKE $4::text)
      AND ($5::boolean IS NULL OR (j.failed_at IS NOT NULL) = $5::boolean)
),
page AS (
    SELECT created_at, jid FROM candidates ORDER BY created_at, jid LIMIT $8
)
SELECT j.*
FROM page p
JOIN werk_jobs j ON j.jid = p.jid
ORDER BY p.created_at, p.jid
