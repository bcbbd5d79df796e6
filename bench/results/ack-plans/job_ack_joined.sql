-- Complete the jobs whose attempt is held by the caller: a current lease ($3), or, for Faktory's
-- protocol whose ACK names only the jid, the worker $6 holding it (lease null; $6 is empty when
-- every item has a lease: ROWS FROM pads it with NULLs). Anything else (unknown, settled, expired,
-- re-reserved by another worker) is left untouched. Completed jobs are deleted unless $4 asks to
-- keep them for inspection. Returns one value: the positions (from 1) of the ack items that took
-- effect (so a stale lease sent beside the current one for the same job is not reported as
-- acked); one array of positions decodes in one go where rows of (jid, lease, wid) cost three
-- values per job.
-- The three lists come as JSON arrays of strings (one orjson call each in the server), not as
-- text arrays: asyncpg checks every element of an array argument for nesting with two Python
-- isinstance calls. For acks of 1,000 that cost the server 1.8 us per job more, and PostgreSQL
-- 1.0 us less, than unpacking JSON here (the 2-core reference machine on a slow day).
-- "Active" is said as "holds a lease" (the same thing: werk_jobs_lease_iff_active), never as
-- state = 'active': that term would let the planner look the jobs up through
-- werk_jobs_active_idx, a walk over every active job, which it does when the statistics say few
-- are active. With tens of thousands of jobs in flight that made each ack, fail and extend cost
-- tens of milliseconds. Named by jid only, the jobs can be found only through the primary key.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
acks AS (
    SELECT a.jid, a.lease::uuid AS lease, a.wid, a.ord
    FROM ROWS FROM (json_array_elements_text($2::json), json_array_elements_text($3::json),
                    json_array_elements_text($6::json)) WITH ORDINALITY AS a(jid, lease, wid, ord)
),
deleted AS (
    DELETE FROM werk_jobs j
    USING acks a
    WHERE NOT $4::boolean AND j.jid = a.jid AND j.lease IS NOT NULL
      AND (j.lease = a.lease OR (a.lease IS NULL AND j.wid = a.wid))
    RETURNING a.ord, j.queue
),
kept AS (
    UPDATE werk_jobs j
    SET state = 'completed', lease = NULL, lease_expires_at = NULL, finished_at = clock.now
    FROM acks a, clock
    WHERE $4::boolean AND j.jid = a.jid AND j.lease IS NOT NULL
      AND (j.lease = a.lease OR (a.lease IS NULL AND j.wid = a.wid))
    RETURNING a.ord, j.queue
),
done AS (
    SELECT * FROM deleted UNION ALL SELECT * FROM kept
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, processed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, d.queue, $5::smallint, count(*)
    FROM done d CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET processed = k.processed + excluded.processed
)
SELECT coalesce(array_agg(ord), '{}') FROM done
