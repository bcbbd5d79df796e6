-- Per (queue, state) pair of queue_state_pairs.sql (the CTEs before it), how many jobs hold it
-- and, for available jobs, when the one that has waited longest was enqueued. One index-only scan
-- per pair: of werk_jobs_queue_state_idx, or of werk_jobs_claim_idx for the available jobs, whose
-- oldest is the oldest of the heads of their priorities. The completed jobs are read only for the
-- completed pair: counted per pair over werk_stored_jobs, they were read for every pair (the
-- planner does not know that werk_completed_jobs holds one state). The CTE that fills the counts
-- marker of queue_list.sql and info.sql.
per_pair AS (
    SELECT p.queue, p.state, c.n, NULL::timestamptz AS oldest
    FROM held p
    CROSS JOIN LATERAL (
        SELECT count(*) AS n
        FROM (SELECT 1
              FROM werk_jobs j
              WHERE j.state NOT IN ('active', 'available') AND j.queue = p.queue
                AND j.state = p.state
              UNION ALL
              SELECT 1
              FROM werk_completed_jobs k
              WHERE p.state = 'completed' AND k.queue = p.queue) j
    ) c
    UNION ALL
    SELECT q.queue, 'available', c.n, q.oldest
    FROM (SELECT queue, min(enqueued_at) AS oldest FROM heads GROUP BY queue) q
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM werk_jobs j WHERE j.state = 'available' AND j.queue = q.queue
    ) c
)
