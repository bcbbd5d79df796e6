-- Notes the failed attempts' jobs that stay (to retry, or dead) and have dependents or
-- dependencies, for their settling (0016_note_settlings.sql). A CTE of the statements that fail
-- attempts, filling their noted marker after their failed CTE (jid, state, dependents,
-- dependencies, batch, finished_at): job_fail.sql and job_orphans_release.sql.
noted AS (
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch,
                                  finished_at)
    SELECT jid, 'active', state, dependents, dependencies, batch, finished_at
    FROM failed WHERE dependents OR dependencies
),
