-- Where the jobs that are not active lie, per queue, or in queue $2 only when $2 is not NULL: two
-- CTEs of a WITH RECURSIVE, the part that fills the pairs marker of queue_list.sql, info.sql and
-- the job pages (admin_job_list.sql, admin_job_list_available.sql). A GROUP BY over every job is
-- planned as a scan of the table; these walks read one index entry per pair instead. The queue
-- bound is a coalesce, not "$2 IS NULL OR", so that the index applies it in a generic plan too;
-- the pair found past queue $2 ends a walk.
-- held: the pairs of the states other than available, skipping through werk_jobs_queue_state_idx
-- (and werk_completed_jobs_queue_idx, through werk_stored_jobs).
held AS (
    SELECT f.queue, f.state
    FROM (SELECT queue, state
          FROM werk_stored_jobs
          WHERE state NOT IN ('active', 'available') AND queue >= coalesce($2::text, '')
          ORDER BY queue, state
          LIMIT 1) f
    WHERE $2::text IS NULL OR f.queue = $2::text
    UNION ALL
    SELECT n.queue, n.state
    FROM held p
    CROSS JOIN LATERAL (
        SELECT j.queue, j.state
        FROM werk_stored_jobs j
        WHERE j.state NOT IN ('active', 'available') AND (j.queue, j.state) > (p.queue, p.state)
        ORDER BY j.queue, j.state
        LIMIT 1
    ) n
    WHERE $2::text IS NULL OR n.queue = $2::text
),
-- heads: the first available job of each (queue, priority), in claim order, skipping through
-- werk_jobs_claim_idx: the next lower priority of the same queue, else the next queue. The first
-- job of a priority is the one of that priority which has waited longest (seq and enqueued_at
-- are set together whenever a job becomes available).
heads AS (
    SELECT f.queue, f.priority, f.enqueued_at
    FROM (SELECT queue, priority, enqueued_at
          FROM werk_jobs
          WHERE state = 'available' AND queue >= coalesce($2::text, '')
          ORDER BY queue, priority DESC, seq
          LIMIT 1) f
    WHERE $2::text IS NULL OR f.queue = $2::text
    UNION ALL
    SELECT n.queue, n.priority, n.enqueued_at
    FROM heads h
    CROSS JOIN LATERAL (
        (SELECT j.queue, j.priority, j.enqueued_at
         FROM werk_jobs j
         WHERE j.state = 'available' AND j.queue = h.queue AND j.priority < h.priority
         ORDER BY j.priority DESC, j.seq
         LIMIT 1)
        UNION ALL
        (SELECT j.queue, j.priority, j.enqueued_at
         FROM werk_jobs j
         WHERE j.state = 'available' AND j.queue > h.queue
         ORDER BY j.queue, j.priority DESC, j.seq
         LIMIT 1)
        LIMIT 1
    ) n
    WHERE $2::text IS NULL OR n.queue = $2::text
)
