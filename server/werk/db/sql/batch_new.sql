-- Open a new batch: its row and its callback jobs, each stored waiting on the edge
-- "<bid>/<kind>" (kind complete, success or death; no jid holds a slash), which the batch
-- releases once, when that condition is first met (werk_batch_move, 0021). A callback is marked
-- as depended on (dependents), so its ack keeps it completed for the batch's page until pruning.
-- $1 now (NULL = database clock), $2 bid, $3 description, $4 parent bid (the caller counted
-- the new batch in it, in this transaction), $5..$15 per callback its kind, jid, jobtype,
-- queue, args, priority, reserve_for, retry, backtrace, custom and keep_result_for, $16 counter
-- shard.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
callback AS (
    SELECT *
    FROM unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::int[],
                $11::int[], $12::int[], $13::int[], $14::text[], $15::int[])
         AS u(kind, jid, jobtype, queue, args, priority, reserve_for, retry, backtrace, custom,
              keep_result_for)
),
batch AS (
    INSERT INTO werk_batches (bid, description, parent, created_at, complete_jid, success_jid,
                              death_jid)
    SELECT $2, $3, $4, c.now,
           (SELECT jid FROM callback WHERE kind = 'complete'),
           (SELECT jid FROM callback WHERE kind = 'success'),
           (SELECT jid FROM callback WHERE kind = 'death')
    FROM clock c
    RETURNING bid
),
jobs AS (
    INSERT INTO werk_jobs (jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                           custom, state, run_at, created_at, keep_result_for, waiting_for,
                           dependents, dependencies)
    SELECT k.jid, k.jobtype, k.queue, k.args::jsonb, k.priority, k.reserve_for, k.retry,
           k.backtrace, k.custom::jsonb, 'waiting', c.now, c.now, k.keep_result_for, 1, true,
           true
    FROM callback k CROSS JOIN clock c
    RETURNING jid
),
edges AS (
    INSERT INTO werk_job_deps (dep, jid, on_failure)
    SELECT $2 || '/' || k.kind, k.jid, 'skip'
    FROM callback k
),
-- Callbacks are jobs pushed like any other: counted, so that pushed and processed agree.
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, pushed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, j.queue, $16::smallint, count(*)
    FROM callback j CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET pushed = k.pushed + excluded.pushed
)
-- A callback's jid kept completed is taken (werk_jids_free fails like werk_jobs_pkey).
SELECT (SELECT bid FROM batch) AS bid, (SELECT count(*) FROM jobs) AS callbacks
WHERE werk_jids_free(ARRAY(SELECT jid FROM jobs))
