-- Lifetime counters per queue (summed over days and shards) and live workers by instructed
-- state, for /metrics. werk_counters holds a row per day, queue and shard, so this stays small.
SELECT 'queue' AS kind, queue AS name,
       sum(pushed)::bigint AS pushed, sum(processed)::bigint AS processed,
       sum(failed)::bigint AS failed, sum(leases_expired)::bigint AS leases_expired,
       sum(expired)::bigint AS expired
FROM werk_counters
GROUP BY queue
UNION ALL
SELECT 'workers', state::text, count(*), 0, 0, 0, 0
FROM werk_workers
WHERE gone_at IS NULL
GROUP BY state
