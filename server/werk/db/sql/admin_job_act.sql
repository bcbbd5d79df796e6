-- An operator's action $9 on the jobs matching the filters (NULL = any): $1 state, $2 queue,
-- $3 jobtype, $4 q (words, see werk_job_search), $5 has failed at least once (the filter is
-- werk_job_filter, migration 0011), $6 these jids
-- only; at most $7 jobs, at $8 (NULL = now): the oldest first, the available ones in the order
-- workers take them. Rows another transaction holds are skipped. Returns the jobs changed.
--   'retry'   dead, expired, skipped and scheduled (incl. retrying) jobs become available,
--             queued behind the work already waiting; a dead or expired one runs without its
--             expiry and without a unique lock (another job may hold its key by now);
--   'kill'    scheduled, available, waiting and active jobs go to dead; one that never failed
--             is marked as killed, so the dead list says why it is there;
--   'cancel'  scheduled, available, waiting and active jobs become cancelled and will not run
--             (again);
--   'delete'  jobs in any state are deleted (an active job's worker then gets job_not_found).
-- An active job killed or cancelled loses its lease (its worker's ack or fail gets lease_lost).
-- The action is a constant in each plan (PostgreSQL plans these statements per call): the state
-- terms of the other actions fold away, and so do their writes. Available jobs are read apart,
-- in claim order from werk_jobs_claim_idx: werk_jobs_queue_state_idx leaves them out, and active
-- jobs too (the states are written as two terms where those are included, each of which an index
-- can serve).
-- A search (q) finds its jobs as the job pages do (the search and indexed CTEs of
-- admin_job_search.sql): from the words indexes, the available jobs from
-- werk_jobs_available_words_idx where it is valid and walked otherwise, the active ones walked.
-- Each source locks its own first $7 (a locking SELECT cannot be a UNION), and the target is
-- the oldest $7 of them all.
WITH clock AS (
    SELECT coalesce($8::timestamptz, now()) AS now
),
/*search*/,
-- The jobs of werk_jobs but the available ones, read by state and queue, each tested row by row:
-- without q, every job the filters and the action cover; with q, the active ones (few, and in
-- no words index).
live AS (
    SELECT j.jid, j.state, j.created_at
    FROM werk_jobs j
    WHERE ($4::text IS NULL OR j.state = 'active') AND j.state <> 'available'
      AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                          $3::text, $4::text, (SELECT words FROM search), $5::boolean)
      AND /*bounds*/
    ORDER BY j.created_at, j.jid
    LIMIT $7
    FOR UPDATE OF j SKIP LOCKED
),
-- The available jobs, in claim order, each tested row by row: without q, or with q while
-- werk_jobs_available_words_idx cannot be read. That test names no column of a job, so it is
-- decided once, before the walk: where the index is read, the walk does not start.
queued AS (
    SELECT j.jid, j.state, j.created_at
    FROM werk_jobs j
    WHERE ($4::text IS NULL OR NOT (SELECT valid FROM indexed))
      AND j.state = 'available'
      AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                          $3::text, $4::text, (SELECT words FROM search), $5::boolean)
      AND /*bounds*/
    ORDER BY j.queue, j.priority DESC, j.seq
    LIMIT $7
    FOR UPDATE OF j SKIP LOCKED
),
-- With q, the other jobs of werk_jobs whose words match, from werk_jobs_words_idx (which leaves
-- available and active jobs out)...
searched AS (
    SELECT j.jid, j.state, j.created_at
    FROM werk_jobs j
    WHERE $4::text IS NOT NULL
      AND werk_job_words(j.errtype, j.message, j.args, j.custom) @@ (SELECT words FROM search)
      AND j.state NOT IN ('available', 'active')
      AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                          $3::text, NULL, NULL, $5::boolean)
      AND /*bounds*/
    ORDER BY j.created_at, j.jid
    LIMIT $7
    FOR UPDATE OF j SKIP LOCKED
),
-- ... and the available ones from werk_jobs_available_words_idx, when it is valid.
found AS (
    SELECT j.jid, j.state, j.created_at
    FROM werk_jobs j
    WHERE $4::text IS NOT NULL AND (SELECT valid FROM indexed)
      AND werk_job_words(j.errtype, j.message, j.args, j.custom) @@ (SELECT words FROM search)
      AND j.state = 'available'
      AND werk_job_filter(j.jobtype, j.errtype, j.message, j.args, j.custom, j.failed_at,
                          $3::text, NULL, NULL, $5::boolean)
      AND /*bounds*/
    ORDER BY j.queue, j.priority DESC, j.seq
    LIMIT $7
    FOR UPDATE OF j SKIP LOCKED
),
-- Completed jobs, kept in a table of their own (0017_completed_jobs_table.sql), are only
-- deleted; with q, found through werk_completed_jobs_words_idx.
kept AS (
    SELECT k.jid, k.state, k.created_at
    FROM werk_completed_jobs k
    WHERE $9::text = 'delete'
      AND ($1::werk_job_state IS NULL OR $1::werk_job_state = 'completed')
      AND ($2::text IS NULL OR k.queue = $2::text)
      AND ($4::text IS NULL
           OR werk_job_words(k.errtype, k.message, k.args, k.custom) @@ (SELECT words FROM search))
      AND werk_job_filter(k.jobtype, k.errtype, k.message, k.args, k.custom, k.failed_at,
                          $3::text, NULL, NULL, $5::boolean)
      AND ($6::text[] IS NULL OR k.jid = ANY($6::text[]))
    ORDER BY k.created_at, k.jid
    LIMIT $7
    FOR UPDATE OF k SKIP LOCKED
),
target AS (
    SELECT t.jid, t.state
    FROM (SELECT * FROM live UNION ALL SELECT * FROM queued UNION ALL SELECT * FROM searched
          UNION ALL SELECT * FROM found UNION ALL SELECT * FROM kept) t
    ORDER BY t.created_at, t.jid
    LIMIT $7
),
-- Each write finds its rows through an array, by primary key, whatever the planner guesses of
-- the target's size (a join on the CTE let it hash-join a scan of the whole table).
retried AS (
    UPDATE werk_jobs j
    SET state = 'available',
        run_at = c.now,
        enqueued_at = c.now,
        seq = nextval('werk_job_seq'),
        finished_at = NULL,
        expires_at = CASE WHEN j.state = 'scheduled' THEN j.expires_at END,
        unique_key = CASE WHEN j.state = 'scheduled' THEN j.unique_key END
    FROM clock c
    WHERE $9::text = 'retry' AND j.jid = ANY (ARRAY(SELECT t.jid FROM target t))
    RETURNING j.jid, j.queue, j.state, j.dependents, j.dependencies, j.batch, j.finished_at
),
-- Kill and cancel both stop the job; a killed job goes to dead, and one that never failed is
-- marked as killed.
stopped AS (
    UPDATE werk_jobs j
    SET state = CASE $9::text WHEN 'kill' THEN 'dead' ELSE 'cancelled' END::werk_job_state,
        finished_at = c.now,
        lease = NULL,
        lease_expires_at = NULL,
        waiting_for = NULL,
        failed_at = CASE $9::text
                        WHEN 'kill' THEN coalesce(j.failed_at, c.now)
                        ELSE j.failed_at
                    END,
        errtype = CASE $9::text WHEN 'kill' THEN coalesce(j.errtype, 'Killed') ELSE j.errtype END,
        message = CASE $9::text
                      WHEN 'kill' THEN coalesce(j.message, 'killed by an operator')
                      ELSE j.message
                  END
    FROM clock c
    WHERE $9::text IN ('kill', 'cancel') AND j.jid = ANY (ARRAY(SELECT t.jid FROM target t))
    RETURNING j.jid, j.queue, j.state, j.dependents, j.dependencies, j.batch, j.finished_at
),
deleted AS (
    DELETE FROM werk_jobs j
    WHERE $9::text = 'delete' AND j.jid = ANY (ARRAY(SELECT t.jid FROM target t))
    RETURNING j.jid, j.queue, NULL::werk_job_state AS state, j.dependents, j.dependencies,
              j.batch, NULL::timestamptz AS finished_at
),
deleted_kept AS (
    DELETE FROM werk_completed_jobs k
    WHERE $9::text = 'delete' AND k.jid = ANY (ARRAY(SELECT t.jid FROM target t))
    RETURNING k.jid, k.queue, NULL::werk_job_state AS state, k.dependents, k.dependencies,
              k.batch, NULL::timestamptz AS finished_at
),
-- The jobs with dependents or dependencies changed, with the state each had before (the
-- settling of 0016_note_settlings.sql).
noted AS (
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch,
                                  finished_at)
    SELECT c.jid, t.state, c.state, c.dependents, c.dependencies, c.batch, c.finished_at
    FROM (SELECT * FROM retried UNION ALL SELECT * FROM stopped UNION ALL SELECT * FROM deleted
          UNION ALL SELECT * FROM deleted_kept) c
    JOIN target t ON t.jid = c.jid
    WHERE c.dependents OR c.dependencies
)
SELECT jid, queue FROM retried
UNION ALL SELECT jid, queue FROM stopped
UNION ALL SELECT jid, queue FROM deleted
UNION ALL SELECT jid, queue FROM deleted_kept

-- part bounds: the state, queue and jid bounds, and the states the action applies to, of job j
-- in werk_jobs (each source of jobs above ends with it, before its order).
($1::werk_job_state IS NULL OR j.state = $1::werk_job_state)
AND ($2::text IS NULL OR j.queue = $2::text)
AND ($6::text[] IS NULL OR j.jid = ANY($6::text[]))
AND CASE
        WHEN $9::text = 'retry'
            THEN j.state IN ('dead', 'expired', 'skipped', 'scheduled')
        WHEN $9::text IN ('kill', 'cancel')
            THEN j.state IN ('scheduled', 'available', 'waiting') OR j.state = 'active'
        WHEN $9::text = 'delete'
            THEN j.state IN ('scheduled', 'available', 'waiting', 'dead', 'cancelled',
                             'expired', 'skipped')
                 OR j.state = 'active'
        ELSE false
    END
