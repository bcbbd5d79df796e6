-- The (queue, state) pairs of the jobs that are not active, or of queue $2's only when $2 is not
-- NULL, found by skipping through werk_jobs_queue_state_idx (and werk_completed_jobs_queue_idx,
-- through werk_stored_jobs): one index lookup per pair, where a
-- GROUP BY over every job is planned as a scan of the table. The queue bound is a coalesce, not
-- "$2 IS NULL OR", so that the index applies it in a generic plan too; the pair found past queue
-- $2 ends the walk. A CTE of a WITH RECURSIVE, the part that fills the pairs marker of
-- queue_list.sql, info.sql and the job pages (admin_job_list.sql).
pairs AS (
    SELECT f.queue, f.state
    FROM (SELECT queue, state
          FROM werk_stored_jobs
          WHERE state <> 'active' AND queue >= coalesce($2::text, '')
          ORDER BY queue, state
          LIMIT 1) f
    WHERE $2::text IS NULL OR f.queue = $2::text
    UNION ALL
    SELECT n.queue, n.state
    FROM pairs p
    CROSS JOIN LATERAL (
        SELECT j.queue, j.state
        FROM werk_stored_jobs j
        WHERE j.state <> 'active' AND (j.queue, j.state) > (p.queue, p.state)
        ORDER BY j.queue, j.state
        LIMIT 1
    ) n
    WHERE $2::text IS NULL OR n.queue = $2::text
)
