-- Push a batch (one job is a batch of one). Existing jids are left alone (a retried push is
-- idempotent); only the jobs inserted are returned, the caller reads the others (job_get_many). $1 now (NULL = database clock), $2.. per-job arrays,
-- $12 counter shard.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
input AS (
    SELECT *
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[],
                $9::int[], $10::text[], $11::timestamptz[])
         WITH ORDINALITY AS t(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                              custom, at, ord)
),
inserted AS (
    INSERT INTO werk_jobs (jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                           custom, at, state, run_at, created_at, enqueued_at)
    SELECT i.jid, i.jobtype, i.queue, i.args::jsonb, i.priority, i.reserve_for, i.retry,
           i.backtrace, i.custom::jsonb, i.at,
           CASE WHEN i.at IS NULL OR i.at <= c.now THEN 'available' ELSE 'scheduled' END::werk_job_state,
           greatest(coalesce(i.at, c.now), c.now),
           c.now,
           CASE WHEN i.at IS NULL OR i.at <= c.now THEN c.now END
    FROM input i CROSS JOIN clock c
    ORDER BY i.ord
    ON CONFLICT (jid) DO NOTHING
    RETURNING *
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, pushed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, i.queue, $12::smallint, count(*)
    FROM inserted i CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET pushed = k.pushed + excluded.pushed
)
SELECT * FROM inserted
