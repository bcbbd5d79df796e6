-- Everything /v1/info shows, in one round trip. Jobs that are not active are counted per (queue,
-- state) pair (queue_state_counts.sql), as in queue_list.sql, which gives the queues' sizes and
-- latency too; active jobs, which the admin indexes leave out, through werk_jobs_active_idx.
-- $2 is always NULL: the queue bound of queue_state_pairs.sql (every queue).
WITH RECURSIVE clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
/*pairs*/,
/*counts*/,
states AS (
    SELECT coalesce(jsonb_object_agg(state, n), '{}') AS v
    FROM (SELECT state, sum(n)::bigint AS n FROM per_pair GROUP BY state
          UNION ALL
          SELECT 'active', count(*) FROM werk_jobs WHERE state = 'active' HAVING count(*) > 0) s
),
available AS (
    SELECT queue, n AS size, oldest FROM per_pair WHERE state = 'available'
),
names AS (
    SELECT queue AS name FROM available
    UNION SELECT name FROM werk_queues
),
queues AS (
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', n.name,
               'size', coalesce(a.size, 0),
               'latency_seconds', coalesce(extract(epoch FROM c.now - a.oldest), 0)::float8,
               'paused', coalesce(q.paused, false)
           ) ORDER BY n.name), '[]') AS v
    FROM names n
    CROSS JOIN clock c
    LEFT JOIN available a ON a.queue = n.name
    LEFT JOIN werk_queues q ON q.name = n.name
),
totals AS (
    SELECT coalesce(sum(processed), 0)::bigint AS processed,
           coalesce(sum(failed), 0)::bigint AS failed,
           coalesce(sum(pushed), 0)::bigint AS pushed
    FROM werk_counters
)
SELECT (SELECT v FROM states) AS states,
       (SELECT v FROM queues) AS queues,
       t.processed, t.failed, t.pushed,
       (SELECT count(*) FROM werk_workers WHERE gone_at IS NULL) AS workers,
       (SELECT now FROM clock) AS now
FROM totals t
