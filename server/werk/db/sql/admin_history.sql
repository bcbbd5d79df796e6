-- Processed, failed and pushed per UTC day for the $2 days up to the day of $1 (NULL = now),
-- optionally for queue $3 only; days without activity read as zeros. Reads werk_counters, which
-- survive job deletion.
WITH days AS (
    SELECT d::date AS day
    FROM generate_series(
        (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date - ($2::int - 1),
        (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date,
        interval '1 day'
    ) AS g(d)
)
SELECT d.day,
       coalesce(sum(k.processed), 0)::bigint AS processed,
       coalesce(sum(k.failed), 0)::bigint AS failed,
       coalesce(sum(k.pushed), 0)::bigint AS pushed
FROM days d
LEFT JOIN werk_counters k ON k.day = d.day AND ($3::text IS NULL OR k.queue = $3::text)
GROUP BY d.day
ORDER BY d.day
