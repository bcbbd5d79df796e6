-- Deletes the failed attempts' jobs whose outcome is 'discard' (retry: false, no dead set). A CTE
-- of the statements that fail attempts, filling their discarded marker: job_fail.sql (a worker's
-- report) and job_orphans_release.sql (leases expired or held by lost workers); each has its
-- target CTE of (jid, outcome).
discarded AS (
    DELETE FROM werk_jobs j USING target t
    WHERE j.jid = t.jid AND t.outcome = 'discard'
    RETURNING j.jid, j.dependents, j.dependencies, j.batch
),
discarded_noted AS (
    INSERT INTO werk_job_changes (jid, before, dependents, dependencies, batch)
    SELECT jid, 'active', dependents, dependencies, batch
    FROM discarded WHERE dependents OR dependencies
),
