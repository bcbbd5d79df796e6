-- FWP's FLUSH: wipe every job, the counters and the queues' paused flags (workers stay
-- registered). Returns how many jobs were deleted.
WITH live AS (
    DELETE FROM werk_jobs RETURNING jid, state, dependents, dependencies, batch
),
kept AS (
    DELETE FROM werk_completed_jobs RETURNING jid, state, dependents, dependencies, batch
),
jobs AS (
    SELECT * FROM live UNION ALL SELECT * FROM kept
),
noted AS (
    INSERT INTO werk_job_changes (jid, before, dependents, dependencies, batch)
    SELECT jid, state, dependents, dependencies, batch
    FROM jobs WHERE dependents OR dependencies
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
