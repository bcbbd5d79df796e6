-- Push jobs. Existing jids are left alone (a retried push is idempotent); only the jobs inserted
-- are returned, the caller reads the others (job_get_many).
-- $1 now (NULL = database clock), $2..$11 the jobs' fields, $12 counter shard, $13 per job the
-- worker id of a fetch waiting for it on this node (NULL: none): such a job, if it is due and
-- its queue is not paused, is stored already reserved by that worker (attempt 1, fresh lease),
-- so the waiting fetch is answered by this commit without a claim of its own.
-- The jobs come from job_push_many.sql (arrays, one element per job) or job_push_one.sql (plain
-- values: a lone job's statement is 0.1 ms quicker without eleven one-element arrays); the answer
-- is job_push_rows.sql (the inserted jobs), job_push_decided.sql (what this statement decided for
-- them) or job_push_jids.sql (their jids, queues and states);
-- existing jids are skipped by job_push_dedupe.sql, or fail the statement with job_push_new.sql.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
input AS (
    SELECT t.*,
           t.at IS NULL OR t.at <= c.now AS due,
           t.wid IS NOT NULL AND (t.at IS NULL OR t.at <= c.now)
             AND NOT EXISTS (SELECT 1 FROM werk_queues p WHERE p.name = t.queue AND p.paused)
             AS handed
    FROM /*jobs*/ AS t(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                       custom, at, wid, ord)
    CROSS JOIN clock c
),
inserted AS (
    INSERT INTO werk_jobs (jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                           custom, at, state, run_at, created_at, enqueued_at, attempt, lease,
                           lease_expires_at, wid)
    SELECT i.jid, i.jobtype, i.queue, i.args::jsonb, i.priority, i.reserve_for, i.retry,
           i.backtrace, i.custom::jsonb, i.at,
           CASE WHEN i.handed THEN 'active' WHEN i.due THEN 'available' ELSE 'scheduled'
           END::werk_job_state,
           greatest(coalesce(i.at, c.now), c.now),
           c.now,
           CASE WHEN i.due THEN c.now END,
           CASE WHEN i.handed THEN 1 ELSE 0 END,
           CASE WHEN i.handed THEN gen_random_uuid() END,
           CASE WHEN i.handed THEN c.now + make_interval(secs => i.reserve_for) END,
           CASE WHEN i.handed THEN i.wid END
    FROM input i CROSS JOIN clock c
    ORDER BY i.ord
    /*conflict*/
    RETURNING /*answer*/
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, pushed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, i.queue, $12::smallint, count(*)
    FROM inserted i CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET pushed = k.pushed + excluded.pushed
)
SELECT * FROM inserted
