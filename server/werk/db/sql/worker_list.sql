-- Worker processes (all, or just $2 when it is not NULL), with how many jobs each holds now
-- (werk_jobs_active_wid_idx). Gone workers are listed only when $1 asks for them.
SELECT w.wid, w.hostname, w.pid, w.labels, w.rss_kb, w.reported_state, w.state::text AS state,
       w.started_at, w.last_beat_at, w.gone_at,
       (SELECT count(*) FROM werk_jobs j WHERE j.state = 'active' AND j.wid = w.wid) AS busy
FROM werk_workers w
WHERE ($1::boolean OR w.gone_at IS NULL)
  AND ($2::text IS NULL OR w.wid = $2::text)
ORDER BY w.hostname, w.wid
