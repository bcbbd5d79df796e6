-- FWP's ACK names only the jid: complete the attempt that worker $3 holds on job $2. A job that is
-- not active under that worker (unknown, settled, expired, or re-reserved by another worker) is
-- left untouched, so a late ACK can never complete a newer attempt. Completed jobs are deleted
-- unless $4 asks to keep them. Returns the acked jid (no row when nothing changed).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
deleted AS (
    DELETE FROM werk_jobs j
    WHERE NOT $4::boolean AND j.jid = $2 AND j.wid = $3 AND j.state = 'active'
    RETURNING j.jid, j.queue
),
kept AS (
    UPDATE werk_jobs j
    SET state = 'completed', lease = NULL, lease_expires_at = NULL, finished_at = clock.now
    FROM clock
    WHERE $4::boolean AND j.jid = $2 AND j.wid = $3 AND j.state = 'active'
    RETURNING j.jid, j.queue
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
SELECT jid FROM done
