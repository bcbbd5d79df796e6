-- Orphaned attempts fail here: leases that expired (ReservationExpired) and leases held by
-- workers that stopped beating for $3 seconds (WorkerLost; those workers are marked gone in the
-- same statement). Each orphaning counts toward $2 max_orphans: a job that keeps killing its
-- worker is dead after that many, whatever its retry budget. Bounded by $4; SKIP LOCKED makes it
-- safe on every node.
-- This runs once a second on every node, so it must not read every active job: the expired ones
-- come from werk_jobs_active_idx in expiry order, and the jobs of lost workers (no index has
-- active jobs by worker: every claim would pay for one) are looked for only while some worker
-- was marked gone in the last $3 seconds. That window retries the leases an earlier pass skipped
-- (locked, or past $4); any left after it wait out their reservation like any other lease.
-- The retry time is capped at $6, the latest time Werk can read back.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
gone AS (
    UPDATE werk_workers w
    SET gone_at = c.now
    FROM clock c
    WHERE w.gone_at IS NULL AND w.last_beat_at < c.now - make_interval(secs => $3::float8)
    RETURNING w.wid
),
lost AS (
    SELECT wid FROM gone
    UNION
    SELECT w.wid FROM werk_workers w, clock c
    WHERE w.gone_at >= c.now - make_interval(secs => $3::float8)
),
expired AS (
    SELECT j.jid
    FROM werk_jobs j
    -- the clock spelled out, so it bounds the index scan (see job_promote.sql)
    WHERE j.state = 'active' AND j.lease_expires_at <= coalesce($1::timestamptz, now())
    ORDER BY j.lease_expires_at
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED  -- other nodes take the next ones, not the same
),
orphaned AS (
    SELECT j.jid
    FROM werk_jobs j
    WHERE EXISTS (SELECT 1 FROM lost)  -- checked once: with no lost worker nothing is read
      AND j.state = 'active' AND j.wid IN (SELECT wid FROM lost)
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
),
target AS (
    -- Found by jid, and the conditions checked again on the row locked ("holds a lease", not
    -- state = 'active', so the planner cannot walk werk_jobs_active_idx instead).
    SELECT j.jid, j.queue, j.retry_count, j.orphans + 1 AS orphans, j.reserve_for,
           CASE WHEN j.lease_expires_at <= c.now THEN 'ReservationExpired' ELSE 'WorkerLost' END
               AS errtype,
           werk_failure_outcome(j.retry, j.retry_count + 1, false, j.orphans + 1, $2) AS outcome,
           ($2 > 0 AND j.orphans + 1 >= $2) AS poisoned
    FROM werk_jobs j, clock c
    WHERE j.jid = ANY (ARRAY(SELECT jid FROM expired UNION SELECT jid FROM orphaned))
      AND j.lease IS NOT NULL
      AND (j.lease_expires_at <= c.now OR j.wid IN (SELECT wid FROM lost))
    ORDER BY j.lease_expires_at
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
),
/*discarded*/
failed AS (
    UPDATE werk_jobs j
    SET state = CASE WHEN t.outcome = 'dead' THEN 'dead' ELSE 'scheduled' END::werk_job_state,
        run_at = CASE WHEN t.outcome = 'retry'
                      THEN least(c.now + werk_retry_delay(t.retry_count), $6::timestamptz)
                      ELSE j.run_at END,
        finished_at = CASE WHEN t.outcome = 'dead' THEN c.now END,
        lease = NULL,
        lease_expires_at = NULL,
        orphans = t.orphans,
        retry_count = j.retry_count + 1,
        failed_at = c.now,
        errtype = t.errtype,
        message = CASE
            WHEN t.poisoned THEN format(
                'orphaned %s times (last: %s); max_orphans is %s, so this job is treated as a '
                'poison pill and will not be retried', t.orphans, t.errtype, $2)
            WHEN t.errtype = 'ReservationExpired'
                THEN format('not acked within its reservation of %s s', t.reserve_for)
            ELSE format('worker %s stopped beating for %s s', j.wid, $3::float8)
        END,
        error_backtrace = '{}'
    FROM target t, clock c
    WHERE j.jid = t.jid AND t.outcome <> 'discard'
    RETURNING j.jid, j.queue, j.state, j.errtype, t.poisoned, j.dependents, j.dependencies,
              j.batch, j.finished_at
),
/*noted*/
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, processed, failed, leases_expired)
    SELECT (c.now AT TIME ZONE 'UTC')::date, t.queue, $5::smallint, count(*), count(*), count(*)
    FROM target t CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard)
    DO UPDATE SET processed = k.processed + excluded.processed, failed = k.failed + excluded.failed,
                  leases_expired = k.leases_expired + excluded.leases_expired
)
SELECT t.jid, t.queue, t.errtype, t.outcome, t.poisoned FROM target t
