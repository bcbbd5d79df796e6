-- Per (queue, state) pair of queue_state_pairs.sql (the pairs CTE before it), how many jobs hold
-- it and, for available jobs, when the oldest was enqueued: one index-only scan of
-- werk_jobs_queue_state_idx per pair. The completed jobs are read only for the completed pair:
-- counted per pair over werk_stored_jobs, they were read for every pair (the planner does not
-- know that werk_completed_jobs holds one state). The CTE that fills the counts marker of
-- queue_list.sql and info.sql.
per_pair AS (
    SELECT p.queue, p.state, c.n, c.oldest
    FROM pairs p
    CROSS JOIN LATERAL (
        SELECT count(*) AS n, min(j.enqueued_at) FILTER (WHERE j.state = 'available') AS oldest
        FROM (SELECT j.state, j.enqueued_at
              FROM werk_jobs j
              WHERE j.state <> 'active' AND j.queue = p.queue AND j.state = p.state
              UNION ALL
              SELECT k.state, k.enqueued_at
              FROM werk_completed_jobs k
              WHERE p.state = 'completed' AND k.queue = p.queue) j
    ) c
)
