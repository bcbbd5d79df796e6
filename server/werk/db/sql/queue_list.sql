-- Every known queue (one with jobs, or one registered by pause/resume) or just queue $2 when it is
-- not NULL: size (available jobs), latency (age of the oldest available job at $1), counts per
-- state and the paused flag. Jobs that are not active are counted from werk_jobs_queue_state_idx
-- alone, one index-only scan per (queue, state) pair (queue_state_pairs.sql finds the pairs): a
-- plain GROUP BY over that many rows is planned as a scan of the table. Active jobs, which
-- the index leaves out, are few: they are counted through werk_jobs_active_idx.
WITH RECURSIVE clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
/*pairs*/,
per_state AS (
    SELECT p.queue, p.state, c.n, c.oldest
    FROM pairs p
    CROSS JOIN LATERAL (
        SELECT count(*) AS n, min(j.enqueued_at) FILTER (WHERE j.state = 'available') AS oldest
        FROM (SELECT j.state, j.enqueued_at
              FROM werk_jobs j
              WHERE j.state <> 'active' AND j.queue = p.queue AND j.state = p.state
              UNION ALL
              -- Read only for the pair of completed jobs (a condition on p alone gates the
              -- scan: counted per pair over the view, the completed jobs were read for every
              -- pair, the planner not knowing that they hold one state).
              SELECT k.state, k.enqueued_at
              FROM werk_completed_jobs k
              WHERE p.state = 'completed' AND k.queue = p.queue) j
    ) c
    UNION ALL
    SELECT queue, state, count(*), NULL
    FROM werk_jobs
    WHERE state = 'active' AND ($2::text IS NULL OR queue = $2::text)
    GROUP BY queue, state
),
per_queue AS (
    SELECT queue,
           jsonb_object_agg(state, n) AS counts,
           coalesce(sum(n) FILTER (WHERE state = 'available'), 0)::bigint AS size,
           min(oldest) AS oldest
    FROM per_state
    GROUP BY queue
),
names AS (
    SELECT queue AS name FROM per_queue
    UNION
    SELECT name FROM werk_queues WHERE $2::text IS NULL OR name = $2::text
)
SELECT n.name,
       coalesce(p.size, 0) AS size,
       coalesce(greatest(extract(epoch FROM c.now - p.oldest), 0), 0)::float8 AS latency_seconds,
       coalesce(q.paused, false) AS paused,
       coalesce(p.counts, '{}'::jsonb) AS counts
FROM names n
CROSS JOIN clock c
LEFT JOIN per_queue p ON p.queue = n.name
LEFT JOIN werk_queues q ON q.name = n.name
ORDER BY n.name
