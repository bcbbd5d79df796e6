-- Expire unstarted jobs (scheduled, available, or waiting for dependencies) whose expires_at
-- has come ($1 now, NULL = database clock), a bounded batch ($2) at a time; SKIP LOCKED lets
-- every node run this without expiring a job twice, and leaves a job a fetch is claiming to that
-- fetch (which takes none past its expires_at). An expired job is finished, like a dead one: it
-- leaves the unique index and is kept for browsing until pruned; an expired waiting job's
-- dependents follow their policy (noted in werk_job_changes, 0016_note_settlings.sql), as for
-- any dependency that ended badly. Counted per queue ($3 counter shard). Returns their jids and
-- queues.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
due AS (
    SELECT j.jid, j.state
    FROM werk_jobs j
    -- The clock spelled out, so it bounds the index scan (as in job_promote.sql).
    WHERE j.expires_at IS NOT NULL AND j.state IN ('scheduled', 'available', 'waiting')
      AND j.expires_at <= coalesce($1::timestamptz, now())
    ORDER BY j.expires_at
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
expired AS (
    UPDATE werk_jobs j
    SET state = 'expired', finished_at = clock.now, waiting_for = NULL
    FROM due, clock
    WHERE j.jid = due.jid
    RETURNING j.jid, j.queue, due.state AS before, j.dependents, j.dependencies, j.batch,
              j.finished_at
),
noted AS (
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch,
                                  finished_at)
    SELECT jid, before, 'expired', dependents, dependencies, batch, finished_at
    FROM expired WHERE dependents OR dependencies
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, expired)
    SELECT (c.now AT TIME ZONE 'UTC')::date, e.queue, $3::smallint, count(*)
    FROM expired e CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET expired = k.expired + excluded.expired
)
SELECT jid, queue FROM expired
