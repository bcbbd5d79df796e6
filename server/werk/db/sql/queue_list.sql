-- Every known queue (one with jobs, or one registered by pause/resume) or just queue $2 when it is
-- not NULL: size (available jobs), latency (age of the oldest available job at $1), counts per
-- state and the paused flag. Jobs that are not active are counted per (queue, state) pair
-- (queue_state_pairs.sql finds the pairs, queue_state_counts.sql counts each): a plain GROUP BY
-- over that many rows is planned as a scan of the table. Active jobs, which the admin indexes
-- leave out, are few: they are counted through werk_jobs_active_idx.
WITH RECURSIVE clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
/*pairs*/,
/*counts*/,
per_state AS (
    SELECT queue, state, n, oldest FROM per_pair
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
