-- One page of the available jobs matching the filters (NULL = any), in the order workers take
-- them: highest priority first, then first enqueued (the parts named ahead), or the reverse (the
-- parts named behind). $1 state (NULL or available; any other state lists none), $2 queue, $3
-- jobtype, $4 q (words, see werk_job_search), $5 has failed at least once (the filter is
-- werk_job_filter, migration 0011). The page starts after the cursor ($6 priority, $7 seq; NULL =
-- first page); $8 rows. Across queues the pages merge on (priority, seq): the order in which the
-- jobs would run if one worker fetched from every queue.
-- Keyset paging from werk_jobs_claim_idx, a queue at a time (the queues are those of the heads
-- CTE of queue_state_pairs.sql): the rest of the cursor's priority, then the priorities after it,
-- at most $8 rows each, so a page costs the same however deep. The priorities past the first
-- page's bound, 1001 or -1001, lie outside the range the schema allows. A search (q) reads the
-- matching jobs from werk_jobs_available_words_idx where the operator made it
-- (WERK_SEARCH_AVAILABLE) and it is valid, and otherwise walks the queues the same way, testing
-- each job.
WITH RECURSIVE /*pairs*/,
/*search*/,
candidates AS (
    SELECT k.priority, k.seq, k.jid
    FROM (SELECT DISTINCT queue FROM heads) p
    CROSS JOIN LATERAL (/*walk*/) k
    WHERE $4::text IS NULL OR NOT (SELECT valid FROM indexed)
    UNION ALL
    SELECT j.priority, j.seq, j.jid
    FROM werk_jobs j
    WHERE $4::text IS NOT NULL AND (SELECT valid FROM indexed)
      AND werk_job_words(j.errtype, j.message, j.args, j.custom) @@ (SELECT words FROM search)
      AND j.state = 'available'
      AND ($2::text IS NULL OR j.queue = $2::text)
      AND /*after*/
      AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                          $3::text, NULL, NULL, $5::boolean)
),
page AS (
    SELECT c.priority, c.seq, c.jid
    FROM candidates c
    WHERE $1::werk_job_state IS NULL OR $1::werk_job_state = 'available'
    ORDER BY /*order*/
    LIMIT $8
)
SELECT j.*
FROM page c
JOIN werk_jobs j ON j.jid = c.jid
ORDER BY /*order*/

-- part ahead: queue p's next rows in claim order after the cursor.
(SELECT j.priority, j.seq, j.jid
 FROM werk_jobs j
 WHERE j.state = 'available' AND j.queue = p.queue AND j.priority = $6::integer
   AND j.seq > $7::bigint AND /*filter*/
 ORDER BY j.seq
 LIMIT $8)
UNION ALL
(SELECT j.priority, j.seq, j.jid
 FROM werk_jobs j
 WHERE j.state = 'available' AND j.queue = p.queue AND j.priority < coalesce($6::integer, 1001)
   AND /*filter*/
 ORDER BY j.priority DESC, j.seq
 LIMIT $8)

-- part behind: queue p's next rows in reverse claim order after the cursor.
(SELECT j.priority, j.seq, j.jid
 FROM werk_jobs j
 WHERE j.state = 'available' AND j.queue = p.queue AND j.priority = $6::integer
   AND j.seq < $7::bigint AND /*filter*/
 ORDER BY j.seq DESC
 LIMIT $8)
UNION ALL
(SELECT j.priority, j.seq, j.jid
 FROM werk_jobs j
 WHERE j.state = 'available' AND j.queue = p.queue AND j.priority > coalesce($6::integer, -1001)
   AND /*filter*/
 ORDER BY j.priority, j.seq DESC
 LIMIT $8)

-- part filter: the filters, of a job j read from the claim index.
werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                $3::text, $4::text, (SELECT words FROM search), $5::boolean)

-- part after_ahead: the cursor bound, of a job j found by its words.
(j.priority < coalesce($6::integer, 1001) OR (j.priority = $6::integer AND j.seq > $7::bigint))

-- part after_behind: the cursor bound, of a job j found by its words.
(j.priority > coalesce($6::integer, -1001) OR (j.priority = $6::integer AND j.seq < $7::bigint))

-- part order_ahead: claim order, of the candidates c.
c.priority DESC, c.seq

-- part order_behind: reverse claim order, of the candidates c.
c.priority, c.seq DESC
