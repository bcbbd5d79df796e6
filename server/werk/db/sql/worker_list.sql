-- Worker processes (all, or just $2 when it is not NULL), with how many jobs each holds now. Gone
-- workers are listed only when $1 asks for them. Active jobs are few and no index has their wid
-- (it would be written on every claim): they are counted per worker in one pass over
-- werk_jobs_active_idx, not once per worker.
WITH busy AS (
    SELECT wid, count(*) AS n
    FROM werk_jobs
    WHERE state = 'active' AND ($2::text IS NULL OR wid = $2::text)
    GROUP BY wid
)
SELECT w.wid, w.hostname, w.pid, w.labels, w.rss_kb, w.reported_state, w.state::text AS state,
       w.started_at, w.last_beat_at, w.gone_at,
       coalesce(b.n, 0) AS busy
FROM werk_workers w
LEFT JOIN busy b ON b.wid = w.wid
WHERE ($1::boolean OR w.gone_at IS NULL)
  AND ($2::text IS NULL OR w.wid = $2::text)
ORDER BY w.hostname, w.wid
