-- The walks over the dependency graph look up each step by key, whatever the planner estimates.
-- 0024_settle_by_edge_lookups.sql forbade whole-table reads by sequential scan; with a backlog of
-- unsettled edges the planner took the primary key of werk_job_deps whole instead (a full index
-- scan, hash-joined against each step of the walk): on a server, whose job traffic plans its
-- statements once for any parameters, an ack of a job with dependents read every edge before
-- the first unsettled one, and a failure at the head of a chain read every edge once per level.
-- The same estimates could hash-join against every waiting job, every kept result, or every
-- finished job. So each step now names the keys it looks up: a lateral subquery that the planner
-- cannot flatten into a join (OFFSET 0) per edge lookup, and `= ANY (ARRAY(...))` for the rows
-- of a table the step reads by key. Otherwise as in 0026_dependency_results_once.sql and
-- 0012_dependencies.sql (the trigger on inserted edges).

CREATE OR REPLACE FUNCTION werk_dependencies_settle(
    settled_jid text, settled_outcome text, settled_result jsonb, settled_at timestamptz
) RETURNS void
LANGUAGE sql VOLATILE
SET enable_seqscan = off
AS $$
    WITH RECURSIVE doomed(jid, fate, cause) AS (
        SELECT e.jid,
               CASE WHEN e.on_failure = 'fail' AND settled_outcome <> 'skipped' THEN 'dead'
                    ELSE 'skipped' END,
               format('dependency %s %s', settled_jid, settled_outcome) COLLATE "C"
        FROM werk_job_deps e
        WHERE e.dep = settled_jid AND e.outcome IS NULL AND settled_outcome <> 'completed'
          AND e.on_failure <> 'ignore'
        UNION
        SELECT e.jid,
               CASE WHEN e.on_failure = 'fail' AND d.fate = 'dead' THEN 'dead'
                    ELSE 'skipped' END,
               format('dependency %s %s', d.jid, d.fate)
        FROM doomed d
        CROSS JOIN LATERAL (SELECT e.jid, e.on_failure
                            FROM werk_job_deps e
                            WHERE e.dep = d.jid AND e.outcome IS NULL AND e.on_failure <> 'ignore'
                            OFFSET 0) e
    ),
    fates AS (
        SELECT jid,
               CASE WHEN bool_or(fate = 'dead') THEN 'dead' ELSE 'skipped' END AS fate,
               min(cause) FILTER (WHERE fate = 'dead') AS death,
               min(cause) AS cause
        FROM doomed
        GROUP BY jid
    ),
    sources AS (
        SELECT settled_jid AS dep, settled_outcome AS outcome
        UNION ALL
        SELECT jid, fate FROM fates
    ),
    edges AS (
        UPDATE werk_job_deps e
        SET outcome = s.outcome,
            result_at = CASE WHEN s.outcome = 'completed' AND settled_result IS NOT NULL
                             THEN werk_dependencies_settle.settled_at END,
            settled_at = werk_dependencies_settle.settled_at
        FROM sources s
        WHERE e.dep = s.dep AND e.outcome IS NULL
          AND e.dep = ANY (ARRAY(SELECT s.dep FROM sources s))
        RETURNING e.jid, e.result_at
    ),
    stored AS (
        INSERT INTO werk_dep_results AS r (dep, completed_at, result, refs)
        SELECT settled_jid, werk_dependencies_settle.settled_at, settled_result, count(*)::int
        FROM edges c
        WHERE c.result_at IS NOT NULL
        HAVING count(*) > 0
        ON CONFLICT (dep, completed_at) DO UPDATE SET refs = r.refs + excluded.refs
    ),
    counts AS (
        SELECT c.jid, count(*)::int AS n, f.fate, coalesce(f.death, f.cause) AS cause
        FROM edges c LEFT JOIN fates f ON f.jid = c.jid
        GROUP BY c.jid, f.fate, f.death, f.cause
    ),
    changed AS (
        UPDATE werk_jobs w
        SET state = CASE WHEN c.fate IS NOT NULL THEN c.fate
                         WHEN w.waiting_for > c.n THEN 'waiting'
                         WHEN w.at > werk_dependencies_settle.settled_at THEN 'scheduled'
                         ELSE 'available' END::werk_job_state,
            waiting_for = CASE WHEN c.fate IS NULL AND w.waiting_for > c.n
                               THEN w.waiting_for - c.n END,
            enqueued_at = CASE WHEN c.fate IS NULL AND w.waiting_for <= c.n
                                    AND NOT coalesce(w.at > werk_dependencies_settle.settled_at,
                                                     false)
                               THEN werk_dependencies_settle.settled_at
                               ELSE w.enqueued_at END,
            run_at = CASE WHEN c.fate IS NULL AND w.waiting_for <= c.n
                          THEN greatest(w.at, werk_dependencies_settle.settled_at)
                          ELSE w.run_at END,
            seq = CASE WHEN c.fate IS NULL AND w.waiting_for <= c.n THEN nextval('werk_job_seq')
                       ELSE w.seq END,
            finished_at = CASE WHEN c.fate IS NOT NULL THEN werk_dependencies_settle.settled_at END,
            failed_at = CASE WHEN c.fate = 'dead' THEN werk_dependencies_settle.settled_at
                             ELSE w.failed_at END,
            errtype = CASE WHEN c.fate = 'dead' THEN 'DependencyFailed' ELSE w.errtype END,
            message = CASE WHEN c.fate IS NOT NULL THEN c.cause ELSE w.message END
        FROM counts c
        WHERE w.jid = c.jid AND w.state = 'waiting'
          AND w.jid = ANY (ARRAY(SELECT c.jid FROM counts c))
        RETURNING w.jid, w.queue, w.state, w.dependents, w.dependencies, w.batch, w.finished_at
    ),
    noted AS (
        INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch,
                                      finished_at)
        SELECT jid, 'waiting', state, dependents, dependencies, batch, finished_at
        FROM changed
        WHERE dependents OR dependencies
    )
    -- Fetches waiting on any node for the queues of the jobs released are woken (the payload
    -- of notify.sql, from no node), and so are result polls waiting on any node for the jobs
    -- finished here (the payload of a settlement, "#" and the jids, in pieces that fit a
    -- notification: a jid is at most a hundred characters). The aggregate reads every row, so
    -- each notification is sent.
    SELECT count(pg_notify('werk_jobs', p.payload))
    FROM (
        SELECT '|' || string_agg(q.queue || ':' || q.n, ',') AS payload
        FROM (SELECT queue, count(*) AS n FROM changed WHERE state = 'available' GROUP BY queue) q
        HAVING count(*) > 0
        UNION ALL
        SELECT '|#' || string_agg(f.jid, ',')
        FROM (SELECT jid, (row_number() OVER ()) / 60 AS piece
              FROM changed WHERE state NOT IN ('waiting', 'available', 'scheduled')) f
        GROUP BY f.piece
    ) p
$$;

CREATE OR REPLACE FUNCTION werk_settlings_settle() RETURNS trigger
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
    noted werk_settlings[];
    s werk_settlings;
BEGIN
    IF current_setting('werk.settling', true) IS DISTINCT FROM 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('werk.settling', 'off', true);
    WITH taken AS (
        DELETE FROM werk_settlings t WHERE t.xid = pg_current_xact_id() RETURNING t.*
    )
    SELECT array_agg(t) INTO noted FROM taken t;
    IF noted IS NULL THEN
        RETURN NULL;
    END IF;

    -- Every waiting job the settlings below will change: the dependents of each settled job,
    -- and, down from a dependency that ended badly, the dependents of each job its policy
    -- finishes (as werk_dependencies_settle walks them). A transaction that only deleted
    -- dependents (an ack of one, say) noted no settled job, and skips this part.
    IF EXISTS (SELECT 1 FROM unnest(noted) n WHERE n.outcome IS NOT NULL) THEN
        PERFORM 1
        FROM werk_jobs w
        WHERE w.state = 'waiting' AND w.jid = ANY (ARRAY(
            WITH RECURSIVE reached(jid, doomed) AS (
                SELECT e.jid, n.outcome <> 'completed' AND e.on_failure <> 'ignore'
                FROM unnest(noted) n
                CROSS JOIN LATERAL (SELECT e.jid, e.on_failure
                                    FROM werk_job_deps e
                                    WHERE e.dep = n.jid AND e.outcome IS NULL
                                    OFFSET 0) e
                WHERE n.jid IS NOT NULL AND n.outcome IS NOT NULL
                UNION
                SELECT e.jid, e.on_failure <> 'ignore'
                FROM reached r
                CROSS JOIN LATERAL (SELECT e.jid, e.on_failure
                                    FROM werk_job_deps e
                                    WHERE e.dep = r.jid AND e.outcome IS NULL
                                    OFFSET 0) e
                WHERE r.doomed
            )
            SELECT jid FROM reached
        ))
        ORDER BY w.jid
        FOR UPDATE;
        FOR s IN
            SELECT * FROM unnest(noted) n
            WHERE n.jid IS NOT NULL AND n.outcome IS NOT NULL
              AND EXISTS (SELECT 1 FROM werk_job_deps e WHERE e.dep = n.jid AND e.outcome IS NULL)
            ORDER BY n.jid
        LOOP
            PERFORM werk_dependencies_settle(s.jid, s.outcome, s.result, s.at);
        END LOOP;
    END IF;

    -- Every batch moved and its ancestors, children first: a batch's depth (how many ancestors
    -- it has) never changes, and a child is deeper than its parent.
    IF EXISTS (SELECT 1 FROM unnest(noted) n WHERE n.bid IS NOT NULL) THEN
        PERFORM 1
        FROM werk_batches b
        JOIN (
            WITH RECURSIVE up(bid, start, k) AS (
                SELECT DISTINCT n.bid, n.bid, 0 FROM unnest(noted) n WHERE n.bid IS NOT NULL
                UNION ALL
                SELECT p.parent, up.start, up.k + 1
                FROM up JOIN werk_batches p ON p.bid = up.bid
                WHERE p.parent IS NOT NULL
            )
            SELECT bid, max(depth) AS depth
            FROM (SELECT bid, count(*) OVER (PARTITION BY start) - 1 - k AS depth FROM up) c
            GROUP BY bid
        ) o ON o.bid = b.bid
        ORDER BY o.depth DESC, b.bid
        FOR UPDATE OF b;
        FOR s IN SELECT * FROM unnest(noted) n WHERE n.bid IS NOT NULL ORDER BY n.bid, n.at LOOP
            PERFORM werk_batch_move(s.bid, s.d_succeeded, s.d_dead, false, s.died, s.at);
        END LOOP;
    END IF;

    -- The results whose edges this transaction deleted, each with how many it deleted.
    IF EXISTS (SELECT 1 FROM unnest(noted) n WHERE n.result_at IS NOT NULL) THEN
        PERFORM 1
        FROM werk_dep_results r
        WHERE r.dep = ANY (ARRAY(SELECT n.jid FROM unnest(noted) n WHERE n.result_at IS NOT NULL))
          AND (r.dep, r.completed_at) IN (SELECT n.jid, n.result_at
                                          FROM unnest(noted) n WHERE n.result_at IS NOT NULL)
        ORDER BY r.dep, r.completed_at
        FOR UPDATE;
        WITH released AS (
            SELECT n.jid, n.result_at, count(*)::int AS k
            FROM unnest(noted) n WHERE n.result_at IS NOT NULL
            GROUP BY n.jid, n.result_at
        ),
        emptied AS (
            DELETE FROM werk_dep_results r
            USING released g
            WHERE r.dep = g.jid AND r.completed_at = g.result_at AND r.refs = g.k
              AND r.dep = ANY (ARRAY(SELECT g.jid FROM released g))
        )
        UPDATE werk_dep_results r
        SET refs = r.refs - g.k
        FROM released g
        WHERE r.dep = g.jid AND r.completed_at = g.result_at AND r.refs > g.k
          AND r.dep = ANY (ARRAY(SELECT g.jid FROM released g));
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION werk_job_deps_inserted_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM werk_dependencies_settle(j.jid, j.state::text, NULL,
                                     (SELECT max(w.created_at) FROM werk_jobs w
                                      WHERE w.jid = ANY (ARRAY(SELECT a.jid FROM added a))))
    FROM werk_jobs j
    WHERE j.jid = ANY (ARRAY(SELECT a.dep FROM added a WHERE a.outcome IS NULL))
      AND j.state IN ('dead', 'expired', 'cancelled', 'skipped');
    RETURN NULL;
END
$$;
