-- FWP's MUTATE over one of Faktory's sets ($3: 'retries' = scheduled after a failure,
-- 'scheduled' = scheduled and never failed, 'dead'), in one statement. $2 is the command:
--   'kill'    move the matching jobs to dead;
--   'requeue' make them available now (at the back of their queue);
--   'discard' delete the matching jobs;  'clear' delete the whole set (filters ignored).
-- Filters ($4 jobtype, $5 jids, $6 a POSIX regex over the job's JSON) are ANDed; NULL = any.
-- Rows another transaction holds are skipped. Returns one row per changed job.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
target AS (
    SELECT j.jid, j.state
    FROM werk_jobs j
    WHERE CASE $3::text
              WHEN 'retries' THEN j.state = 'scheduled' AND j.failed_at IS NOT NULL
              WHEN 'scheduled' THEN j.state = 'scheduled' AND j.failed_at IS NULL
              WHEN 'dead' THEN j.state = 'dead'
              ELSE false
          END
      AND ($2::text = 'clear' OR (
               ($4::text IS NULL OR j.jobtype = $4::text)
           AND ($5::text[] IS NULL OR j.jid = ANY ($5::text[]))
           AND ($6::text IS NULL
                OR jsonb_build_object('jid', j.jid, 'jobtype', j.jobtype, 'queue', j.queue,
                                      'args', j.args, 'custom', j.custom)::text ~ $6::text)))
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM werk_jobs j USING target t
    WHERE j.jid = t.jid AND $2::text IN ('discard', 'clear')
    RETURNING j.jid, j.queue, NULL::werk_job_state AS state, j.dependents, j.dependencies,
              j.batch, NULL::timestamptz AS finished_at
),
killed AS (
    UPDATE werk_jobs j
    SET state = 'dead', finished_at = c.now
    FROM target t, clock c
    WHERE j.jid = t.jid AND $2::text = 'kill' AND j.state <> 'dead'
    RETURNING j.jid, j.queue, j.state, j.dependents, j.dependencies, j.batch, j.finished_at
),
requeued AS (
    UPDATE werk_jobs j
    SET state = 'available', run_at = c.now, enqueued_at = c.now, finished_at = NULL,
        seq = nextval('werk_job_seq'),
        -- A dead job comes back without its expiry or unique lock (another job may hold its
        -- key by now).
        expires_at = CASE WHEN j.state = 'dead' THEN NULL ELSE j.expires_at END,
        unique_key = CASE WHEN j.state = 'dead' THEN NULL ELSE j.unique_key END
    FROM target t, clock c
    WHERE j.jid = t.jid AND $2::text = 'requeue'
    RETURNING j.jid, j.queue, j.state, j.dependents, j.dependencies, j.batch, j.finished_at
),
-- The jobs with dependents or dependencies changed, with the state each had before (the
-- settling of 0016_note_settlings.sql).
noted AS (
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch,
                                  finished_at)
    SELECT c.jid, t.state, c.state, c.dependents, c.dependencies, c.batch, c.finished_at
    FROM (SELECT * FROM deleted UNION ALL SELECT * FROM killed UNION ALL SELECT * FROM requeued) c
    JOIN target t ON t.jid = c.jid
    WHERE c.dependents OR c.dependencies
)
SELECT 'deleted' AS action, jid, queue FROM deleted
UNION ALL SELECT 'killed', jid, queue FROM killed
UNION ALL SELECT 'requeued', jid, queue FROM requeued
