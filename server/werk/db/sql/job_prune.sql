-- Retention, a bounded batch ($5) at a time so pruning never holds many row locks for long:
-- dead, expired and skipped jobs older than $2 seconds, beyond the newest $3 of each state (oldest
-- first), and completed jobs (werk_completed_jobs) $4 seconds past their keep_until (their own
-- keep_result_for: see job_ack.sql; $4 is WERK_COMPLETED_RETENTION). Returns how many rows went.
-- The clock is spelled out in each bound, so it bounds the index scan: a CTE's value, which two
-- parts read, is only a filter, and each pass read every kept completed job.
WITH old_finished AS (
    SELECT j.jid FROM werk_jobs j
    WHERE j.state IN ('dead', 'expired', 'skipped')
      AND j.finished_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2::float8)
    ORDER BY j.finished_at
    LIMIT $5
),
surplus AS (
    SELECT s.jid FROM (
        SELECT j.jid, j.finished_at,
               row_number() OVER (PARTITION BY j.state ORDER BY j.finished_at DESC) AS newer
        FROM werk_jobs j
        WHERE j.state IN ('dead', 'expired', 'skipped')
    ) s
    WHERE s.newer > $3
    ORDER BY s.finished_at
    LIMIT $5
),
expired_completed AS (
    SELECT k.jid FROM werk_completed_jobs k
    WHERE k.keep_until < coalesce($1::timestamptz, now()) - make_interval(secs => $4::float8)
    ORDER BY k.keep_until
    LIMIT $5
    FOR UPDATE OF k SKIP LOCKED
),
doomed AS (
    SELECT jid FROM old_finished
    UNION SELECT jid FROM surplus
),
locked AS (
    SELECT j.jid FROM werk_jobs j JOIN doomed d ON d.jid = j.jid
    WHERE j.state IN ('dead', 'expired', 'skipped')
    FOR UPDATE OF j SKIP LOCKED
),
deleted AS (
    DELETE FROM werk_jobs j USING locked l WHERE j.jid = l.jid
    RETURNING j.jid, j.state, j.dependents, j.dependencies, j.batch
),
deleted_completed AS (
    -- By key, as an array: a join with expired_completed, whose size a generic plan cannot know,
    -- may be planned as a scan of the whole table.
    DELETE FROM werk_completed_jobs k
    WHERE k.jid = ANY (ARRAY(SELECT jid FROM expired_completed))
    RETURNING k.jid, k.state, k.dependents, k.dependencies, k.batch
),
gone AS (
    SELECT * FROM deleted UNION ALL SELECT * FROM deleted_completed
),
noted AS (
    INSERT INTO werk_job_changes (jid, before, dependents, dependencies, batch)
    SELECT jid, state, dependents, dependencies, batch
    FROM gone WHERE dependents OR dependencies
)
SELECT state FROM gone
