-- One page of the jobs that are not available matching the filters (NULL = any): $1 state, $2
-- queue, $3 jobtype, $4 q (words, see werk_job_search), $5 has failed at least once (the filter
-- is werk_job_filter, migration 0011). The page starts after the cursor ($6 created_at, $7 jid;
-- NULL = first page); $8 rows. Newest or oldest first: the order marker (part desc or asc) and
-- the after marker (part older or newer: the cursor bound) say which. Available jobs are listed
-- by admin_job_list_available.sql, in the order workers take them.
-- Keyset paging, so a page costs the same on the first and the thousandth page: jobs that are
-- neither available nor active are read in order per (queue, state) pair (the held CTE of
-- queue_state_pairs.sql) from werk_jobs_queue_state_idx, at most $8 per pair (no index orders a
-- state across queues, nor a queue across states); active jobs, which the index leaves out, are
-- few and read through werk_jobs_active_idx. The first $8 of those are the page. A search (q)
-- reads the jobs whose words match from werk_jobs_words_idx instead of walking the pairs. The
-- bounds are written so that an index can use them in a generic plan too: coalesce, not
-- "$n IS NULL OR". Completed jobs are read the same way from werk_completed_jobs, through
-- werk_stored_jobs.
WITH RECURSIVE /*pairs*/,
/*search*/,
candidates AS (
    SELECT k.created_at, k.jid
    FROM held p
    CROSS JOIN LATERAL (
        SELECT j.created_at, j.jid
        FROM werk_stored_jobs j
        WHERE j.state NOT IN ('active', 'available') AND j.queue = p.queue AND j.state = p.state
          AND (j.created_at, j.jid) /*after*/
          AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                          $3::text, $4::text, (SELECT words FROM search), $5::boolean)
        ORDER BY j.created_at /*order*/, j.jid /*order*/
        LIMIT $8
    ) k
    WHERE ($1::werk_job_state IS NULL OR p.state = $1::werk_job_state)
      AND $4::text IS NULL
    UNION ALL
    SELECT j.created_at, j.jid
    FROM werk_stored_jobs j
    WHERE $4::text IS NOT NULL
      AND werk_job_words(j.errtype, j.message, j.args, j.custom) @@ (SELECT words FROM search)
      AND j.state NOT IN ('available', 'active')
      AND ($1::werk_job_state IS NULL OR j.state = $1::werk_job_state)
      AND /*matched*/
    UNION ALL
    SELECT j.created_at, j.jid
    FROM werk_jobs j
    WHERE j.state = 'active' AND ($1::werk_job_state IS NULL OR $1::werk_job_state = 'active')
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND (j.created_at, j.jid) /*after*/
      AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                          $3::text, $4::text, (SELECT words FROM search), $5::boolean)
),
page AS (
    SELECT created_at, jid FROM candidates ORDER BY created_at /*order*/, jid /*order*/ LIMIT $8
)
SELECT j.*
FROM page p
JOIN werk_stored_jobs j ON j.jid = p.jid
ORDER BY p.created_at /*order*/, p.jid /*order*/

-- part matched: the queue bound, the cursor and the other filters, for a job j whose words
-- matched q in a words index (so werk_job_filter need not test them again).
($2::text IS NULL OR j.queue = $2::text)
AND (j.created_at, j.jid) /*after*/
AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                    $3::text, NULL, NULL, $5::boolean)

-- part desc: newest first.
DESC

-- part asc: oldest first.
ASC

-- part older: jobs created before the cursor (none given: every job).
< (coalesce($6::timestamptz, 'infinity'), coalesce($7::text, ''))

-- part newer: jobs created after the cursor (none given: every job).
> (coalesce($6::timestamptz, '-infinity'), coalesce($7::text, ''))
