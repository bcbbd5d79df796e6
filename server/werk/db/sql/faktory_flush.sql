-- FWP's FLUSH: wipe every job, the counters and the queues' paused flags (workers stay
-- registered). Returns how many jobs were deleted.
WITH jobs AS (
    DELETE FROM werk_jobs RETURNING 1
),
counters AS (
    DELETE FROM werk_counters RETURNING 1
),
queues AS (
    DELETE FROM werk_queues RETURNING 1
)
SELECT (SELECT count(*) FROM jobs) AS jobs,
       (SELECT count(*) FROM counters) AS counters,
       (SELECT count(*) FROM queues) AS queues
