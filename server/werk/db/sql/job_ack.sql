-- Complete the jobs whose attempt is held by the caller: $2 maps each jid to the lease presented
-- for it; $5, for Faktory's protocol whose ACK names only the jid, maps a jid to the worker that
-- must hold it (one of the two is empty). Anything else (unknown, settled, expired, re-reserved
-- by another worker) is left untouched. Completed jobs are deleted, unless $3 asks to keep every
-- completed job for inspection or the job was pushed with keep_result_for: a kept job moves to
-- werk_completed_jobs, with the result $6 maps its jid to (if any), kept until finished_at plus its
-- keep_result_for (pruning adds WERK_COMPLETED_RETENTION). A job other jobs depend on is kept
-- too, so that its settling (noted in werk_job_changes, 0016_note_settlings.sql) sees it
-- completed, with its result, not deleted; a deleted job with dependencies is noted there so
-- that its edges go with it. Returns two JSON arrays (each decoded in one call): the jids
-- completed, and those of them kept.
-- Two parts (settles): deleted, which completes only the jobs deleted at ack, and any, which
-- completes every job. A statement that may insert into werk_completed_jobs opens that table and
-- its indexes each time it runs, kept job or not; so acks are written with part deleted first,
-- and only the jobs it did not complete (kept ones, or leases no longer current) are written
-- again with part any.
-- The jobs are found by their keys alone and each is compared with its own item, never joined to
-- a list of items: the planner sizes a join by werk_jobs's statistics, and with statistics taken
-- while every job waited (or before VACUUM emptied the table) it estimates one job in flight and
-- reads the whole list once per job it scans, which grows with the square of the batch; by key
-- an ack costs the same in every such state.
-- jsonb, not json: ->> looks a key up by binary search in jsonb, by a scan of the text in json.
-- Leases are compared as text: the caller gives each in canonical form (what uuid's output
-- writes), and parsing a UUID per row costs more than writing one.
-- "Active" is said as "holds a lease" (the same thing: werk_jobs_lease_iff_active), never as
-- state = 'active', which would let the planner walk werk_jobs_active_idx over every active job.
-- (SELECT jids FROM named)::text[] is one array value; without the cast, ANY (SELECT ...) would
-- compare each jid with whole arrays.
WITH named AS (
    SELECT ARRAY(SELECT jsonb_object_keys($2::jsonb))
           || ARRAY(SELECT jsonb_object_keys($5::jsonb)) AS jids
),
deleted AS (
    DELETE FROM werk_jobs j
    WHERE NOT $3::boolean AND j.jid = ANY ((SELECT jids FROM named)::text[])
      AND (j.lease::text = $2::jsonb ->> j.jid
           OR (j.lease IS NOT NULL AND j.wid = $5::jsonb ->> j.jid))
      AND j.keep_result_for IS NULL AND j.dependents IS NULL
    RETURNING j.jid, j.queue, j.dependencies
),
noted AS (
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch, result,
                                  finished_at)
    SELECT jid, 'active'::werk_job_state, NULL::werk_job_state, NULL::boolean, dependencies,
           NULL::text, NULL::jsonb, NULL::timestamptz
    FROM deleted WHERE dependencies
),
/*settles*/
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, processed)
    SELECT (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date, d.queue,
           $4::smallint, count(*)
    FROM done d
    GROUP BY 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET processed = k.processed + excluded.processed
)
SELECT coalesce(json_agg(jid), '[]') AS done,
       coalesce(json_agg(jid) FILTER (WHERE kept), '[]') AS kept
FROM done

-- part deleted: no job is kept.
done AS (
    SELECT jid, queue, false AS kept FROM deleted
),

-- part any: a job may be kept. The jobs kept are looked for only when the deletion did not take
-- every job named (the count is evaluated once, before the scan). A kept job moves to
-- werk_completed_jobs (0017_completed_jobs_table.sql).
moved AS (
    DELETE FROM werk_jobs j
    WHERE (SELECT count(*) FROM deleted) < (SELECT cardinality(jids) FROM named)
      AND j.jid = ANY ((SELECT jids FROM named)::text[])
      AND (j.lease::text = $2::jsonb ->> j.jid
           OR (j.lease IS NOT NULL AND j.wid = $5::jsonb ->> j.jid))
      AND ($3::boolean OR j.keep_result_for IS NOT NULL OR j.dependents)
    RETURNING j.*
),
kept AS (
    INSERT INTO werk_completed_jobs (
        jid, jobtype, queue, args, priority, reserve_for, retry, backtrace, custom, at, state,
        seq, run_at, created_at, enqueued_at, attempt, orphans, wid, progress, retry_count,
        failed_at, errtype, message, error_backtrace, finished_at, keep_result_for, result,
        keep_until, expires_at, unique_key, unique_until, unique_spec, dependents, dependencies,
        batch)
    SELECT m.jid, m.jobtype, m.queue, m.args, m.priority, m.reserve_for, m.retry, m.backtrace,
           m.custom, m.at, 'completed', m.seq, m.run_at, m.created_at, m.enqueued_at, m.attempt,
           m.orphans, m.wid, m.progress, m.retry_count, m.failed_at, m.errtype, m.message,
           m.error_backtrace, coalesce($1::timestamptz, now()), m.keep_result_for,
           $6::jsonb -> m.jid,
           coalesce($1::timestamptz, now()) + make_interval(secs => coalesce(m.keep_result_for, 0)),
           m.expires_at, m.unique_key, m.unique_until, m.unique_spec, m.dependents,
           m.dependencies, m.batch
    FROM moved m
    RETURNING jid, queue, dependents, dependencies, batch, result, finished_at
),
noted_kept AS (
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch, result,
                                  finished_at)
    SELECT jid, 'active', 'completed', dependents, dependencies, batch, result, finished_at
    FROM kept WHERE dependents OR dependencies
),
done AS (
    SELECT jid, queue, false AS kept FROM deleted UNION ALL SELECT jid, queue, true FROM kept
),
