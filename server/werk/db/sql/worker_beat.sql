-- Register or refresh a worker process. A worker already declared gone stays gone: the answer
-- tells it to terminate (its leases were released, its tokens are stale).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
)
INSERT INTO werk_workers AS w (wid, hostname, pid, labels, rss_kb, reported_state, started_at,
                               last_beat_at)
SELECT $2, $3, $4, $5, $6, $7, c.now, c.now FROM clock c
ON CONFLICT (wid) DO UPDATE
SET hostname = excluded.hostname,
    pid = coalesce(excluded.pid, w.pid),
    labels = excluded.labels,
    rss_kb = coalesce(excluded.rss_kb, w.rss_kb),
    reported_state = coalesce(excluded.reported_state, w.reported_state),
    last_beat_at = CASE WHEN w.gone_at IS NULL THEN excluded.last_beat_at ELSE w.last_beat_at END
RETURNING CASE WHEN w.gone_at IS NOT NULL THEN 'terminate' ELSE w.state::text END AS state
