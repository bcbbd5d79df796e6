-- Push jobs of which some depend on others (depends_on): the jobs, their edges and the marks on
-- their dependencies, in one statement. A job with dependencies not settled is stored waiting,
-- counting them (waiting_for); one whose dependencies all completed already is stored as any
-- other job, its edges naming their results (werk_dep_results, stored once per completion and
-- counted per edge: 0026_dependency_results_once.sql). The dependencies stored already are marked
-- (dependents) and so locked until this push commits: their settling, after it, finds the new
-- edges. An edge to a dependency that ended badly already is settled by the edges' insert
-- trigger (0012_dependencies.sql) at the end of this statement. Existing jids are left alone,
-- and their edges with them. If a dependency is neither stored nor pushed here, nothing is
-- written and it is answered in missing.
-- $1 now (NULL = database clock), $2..$14 per job its jid, jobtype, queue, args, priority,
-- reserve_for, retry, backtrace, custom, at, expires_at, expires_in (seconds from `at` or now),
-- keep_result_for; $15 counter shard; $16..$19 per edge the dependent's jid, the dependency's
-- jid, the policy and the ref that named the dependency (NULL: named by jid); $20 per job its
-- batch (an empty array: none has one).
-- A job pushed with a batch joins it: the batch counts the members inserted, only while it is
-- not committed (the update waits for the batch's row lock and sees a commit made meanwhile).
-- A member is marked as depended on (dependents): its batch counts on its settling.
-- Answers the jids inserted, the dependencies found (marked, or kept completed), the
-- dependencies missing, the batches the members inserted name, and those of them joined (any
-- other: not found or committed, and the caller rolls the push back).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
input AS (
    SELECT u.*,
           u.at IS NULL OR u.at <= c.now AS due,
           CASE WHEN u.expires_in IS NOT NULL
                THEN least(greatest(coalesce(u.at, c.now), c.now)
                           + make_interval(secs => u.expires_in),
                           '9999-12-31 23:59:59.999999+00'::timestamptz)
           END AS expires_after
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[],
                $9::int[], $10::text[], $11::timestamptz[], $12::timestamptz[], $13::float8[],
                $14::int[], $20::text[]) WITH ORDINALITY
         AS u(jid, jobtype, queue, args, priority, reserve_for, retry, backtrace, custom, at,
              expires_at, expires_in, keep_result_for, batch, ord)
    CROSS JOIN clock c
),
edges AS (
    SELECT e.jid, e.dep, e.on_failure, e.ref
    FROM unnest($16::text[], $17::text[], $18::text[], $19::text[]) AS e(jid, dep, on_failure, ref)
),
marked AS (
    UPDATE werk_jobs j
    SET dependents = true
    WHERE j.jid = ANY (ARRAY(SELECT DISTINCT e.dep FROM edges e))
    RETURNING j.jid, j.state, j.result, j.finished_at
),
-- A dependency kept completed (werk_completed_jobs) has settled: nothing to mark.
found AS (
    SELECT jid, state, result, finished_at FROM marked
    UNION ALL
    SELECT k.jid, k.state, k.result, k.finished_at
    FROM werk_completed_jobs k
    WHERE k.jid = ANY (ARRAY(SELECT DISTINCT e.dep FROM edges e))
),
missing AS (
    SELECT DISTINCT e.dep
    FROM edges e
    WHERE NOT EXISTS (SELECT 1 FROM found m WHERE m.jid = e.dep)
      AND NOT EXISTS (SELECT 1 FROM input i WHERE i.jid = e.dep)
),
linked AS (
    SELECT e.jid, e.dep, e.ref, e.on_failure,
           CASE WHEN m.state = 'completed' THEN 'completed' END AS outcome,
           CASE WHEN m.state = 'completed' AND m.result IS NOT NULL THEN m.finished_at END
               AS result_at
    FROM edges e LEFT JOIN found m ON m.jid = e.dep
),
pending AS (
    SELECT l.jid, count(*) FILTER (WHERE l.outcome IS NULL)::int AS n
    FROM linked l
    GROUP BY l.jid
),
inserted AS (
    INSERT INTO werk_jobs (jid, jobtype, queue, args, priority, reserve_for, retry, backtrace,
                           custom, at, state, run_at, created_at, enqueued_at, expires_at,
                           keep_result_for, waiting_for, dependents, dependencies, batch)
    SELECT i.jid, i.jobtype, i.queue, i.args::jsonb, i.priority, i.reserve_for, i.retry,
           i.backtrace, i.custom::jsonb, i.at,
           CASE WHEN p.n > 0 THEN 'waiting' WHEN i.due THEN 'available' ELSE 'scheduled'
           END::werk_job_state,
           greatest(coalesce(i.at, c.now), c.now),
           c.now,
           CASE WHEN i.due AND coalesce(p.n, 0) = 0 THEN c.now END,
           coalesce(i.expires_at, i.expires_after),
           i.keep_result_for,
           nullif(p.n, 0),
           CASE WHEN i.jid IN (SELECT e.dep FROM edges e) OR i.batch IS NOT NULL THEN true END,
           CASE WHEN p.jid IS NOT NULL THEN true END,
           i.batch
    FROM input i CROSS JOIN clock c LEFT JOIN pending p ON p.jid = i.jid
    WHERE NOT EXISTS (SELECT 1 FROM missing)
      AND NOT EXISTS (SELECT 1 FROM werk_completed_jobs k WHERE k.jid = i.jid)
    ORDER BY i.ord
    ON CONFLICT (jid) DO NOTHING
    RETURNING jid, queue, batch
),
-- The batches joined are locked in bid order (the order settlings take them in,
-- 0015_settle_in_order.sql), not in whatever order the update below would meet them.
joining AS (
    SELECT b.bid
    FROM werk_batches b
    WHERE b.bid = ANY (ARRAY(SELECT DISTINCT i.batch FROM inserted i WHERE i.batch IS NOT NULL))
    ORDER BY b.bid
    FOR UPDATE
),
joined AS (
    UPDATE werk_batches b
    SET total = b.total + m.n
    FROM (SELECT i.batch, count(*)::int AS n
          FROM inserted i WHERE i.batch IS NOT NULL GROUP BY i.batch) m
    WHERE b.bid = m.batch AND NOT b.committed
      AND b.bid = ANY (ARRAY(SELECT j.bid FROM joining j))
    RETURNING b.bid
),
-- The result of each dependency kept completed, counted for the edges inserted that name it:
-- added to its row, or stored again if no edge names it any more (its row was deleted, or is
-- being deleted: the upsert waits for that and then inserts). In dep order, the order in which
-- a transaction that deleted edges locks these rows as it commits (werk_settlings_settle,
-- 0026_dependency_results_once.sql), and after the jobs this statement marks and inserts.
stored AS (
    INSERT INTO werk_dep_results AS r (dep, completed_at, result, refs)
    SELECT m.jid, m.finished_at, m.result, c.n
    FROM (SELECT l.dep, count(*)::int AS n
          FROM linked l
          WHERE l.result_at IS NOT NULL AND l.jid IN (SELECT jid FROM inserted)
          GROUP BY l.dep) c
    JOIN found m ON m.jid = c.dep
    ORDER BY m.jid
    ON CONFLICT (dep, completed_at) DO UPDATE SET refs = r.refs + excluded.refs
),
linked_inserted AS (
    INSERT INTO werk_job_deps (dep, jid, ref, on_failure, outcome, result_at, settled_at)
    SELECT l.dep, l.jid, l.ref, l.on_failure::werk_dependency_policy, l.outcome, l.result_at,
           CASE WHEN l.outcome IS NOT NULL THEN c.now END
    FROM linked l CROSS JOIN clock c
    WHERE l.jid IN (SELECT jid FROM inserted)
),
counted AS (
    INSERT INTO werk_counters AS k (day, queue, shard, pushed)
    SELECT (c.now AT TIME ZONE 'UTC')::date, i.queue, $15::smallint, count(*)
    FROM inserted i CROSS JOIN clock c
    GROUP BY 1, 2
    ON CONFLICT (day, queue, shard) DO UPDATE SET pushed = k.pushed + excluded.pushed
)
SELECT ARRAY(SELECT jid FROM inserted)::text[] AS inserted,
       ARRAY(SELECT jid FROM found)::text[] AS marked,
       ARRAY(SELECT dep FROM missing)::text[] AS missing,
       ARRAY(SELECT DISTINCT batch FROM inserted WHERE batch IS NOT NULL)::text[] AS batches,
       ARRAY(SELECT bid FROM joined)::text[] AS joined
-- A jid kept completed meanwhile is taken (werk_jids_free fails like werk_jobs_pkey).
WHERE (SELECT werk_jids_free(ARRAY(SELECT jid FROM inserted)))
