-- Delete up to $2 available jobs of queue $1 (jobs held by workers, scheduled, retrying and dead
-- jobs are left alone). Rows another transaction holds are skipped; the caller repeats until a
-- batch comes back short. Returns the jids deleted.
WITH doomed AS (
    SELECT jid FROM werk_jobs
    WHERE queue = $1 AND state = 'available'
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM werk_jobs j USING doomed d WHERE j.jid = d.jid
    RETURNING j.jid, j.dependents, j.dependencies, j.batch
),
noted AS (
    INSERT INTO werk_job_changes (jid, before, dependents, dependencies, batch)
    SELECT jid, 'available', dependents, dependencies, batch
    FROM deleted WHERE dependents OR dependencies
)
SELECT jid FROM deleted
