-- A completed dependency's result is stored once, in werk_dep_results, and each of its edges
-- names it, where it was copied onto every edge (0012_dependencies.sql): a dependency with
-- thousands of dependents wrote its result thousands of times at its ack, and every copy stayed
-- as long as its dependent was kept.
--
-- A row is the result of one completion: the dependency's jid and when it completed (a jid is
-- free again once its completed job is pruned, and a later job of that jid completes with a
-- result of its own while edges to the earlier one may still be kept), the result, its size as
-- the API writes it (the text of its JSON: the readers add these sizes up against their budget,
-- job_dependencies.sql and job_dependency_page.sql), and refs, how many edges name it. An edge
-- names it by (dep, result_at) once its dependency completed with a result; the foreign key
-- makes a row outlive every edge that names it.
-- refs stays exact through every statement that marks, inserts or deletes such an edge:
-- - a settling (werk_dependencies_settle, below) inserts the row counting the edges it marked;
-- - a push of dependents of a job kept completed (job_push_deps.sql) adds the edges it inserts,
--   inserting the row again if it is gone (an upsert that meets a row being deleted waits for
--   that deletion and then inserts);
-- - the deletion of a dependent's edges (werk_job_changes_note, below) notes the rows they name,
--   and as the transaction commits (werk_settlings_settle, below) those rows are locked, in key
--   order, then the ones left without an edge are deleted and the others counted down.
-- No row is left at 0: whoever takes its last edge deletes it.
CREATE TABLE werk_dep_results (
    dep          werk_jid COLLATE "C" NOT NULL,
    completed_at timestamptz NOT NULL,
    result       jsonb NOT NULL,
    result_size  integer GENERATED ALWAYS AS (octet_length(result::text)) STORED,
    refs         integer NOT NULL CHECK (refs > 0),
    PRIMARY KEY (dep, completed_at)
);

ALTER TABLE werk_job_deps ADD COLUMN result_at timestamptz;

-- The results the edges hold: one row for each distinct result of a dependency (the edges of one
-- completion hold equal copies), named by the completion of the job kept completed with that
-- result, so that later pushes of its dependents count on the same row, else by the earliest
-- settling of its edges. Results are told apart by their text, which is what the API writes
-- (jsonb equality takes 1.0 and 1 for the same value).
WITH copies AS (
    SELECT e.dep, e.result::text AS result, min(e.settled_at) AS settled_at,
           count(*)::int AS refs
    FROM werk_job_deps e
    WHERE e.result IS NOT NULL
    GROUP BY e.dep, e.result::text
),
stored AS (
    INSERT INTO werk_dep_results (dep, completed_at, result, refs)
    SELECT c.dep, coalesce(k.finished_at, c.settled_at), c.result::jsonb, c.refs
    FROM copies c
    LEFT JOIN werk_completed_jobs k ON k.jid = c.dep AND k.result::text = c.result
    RETURNING dep, completed_at, result
)
UPDATE werk_job_deps e
SET result_at = s.completed_at
FROM stored s
WHERE e.dep = s.dep AND e.result::text = s.result::text;

ALTER TABLE werk_job_deps
    DROP COLUMN result_size,
    DROP CONSTRAINT werk_job_deps_check1,
    DROP COLUMN result,
    ADD CONSTRAINT werk_job_deps_result_at_check CHECK (result_at IS NULL OR outcome = 'completed'),
    ADD CONSTRAINT werk_job_deps_result_fkey FOREIGN KEY (dep, result_at)
        REFERENCES werk_dep_results (dep, completed_at);

-- The edges a settling marks completed name the dependency's result, stored once here, and the
-- row counts them. A push in the settling transaction itself may have stored that row already
-- (for edges inserted once the job was kept completed): the count is added to it. Otherwise as
-- in 0016_note_settlings.sql, with the setting of 0024_settle_by_edge_lookups.sql.
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
        JOIN werk_job_deps e ON e.dep = d.jid AND e.outcome IS NULL AND e.on_failure <> 'ignore'
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

-- A deleted dependent's edges go with it, and each edge that named a result is noted in
-- werk_settlings (the dependency's jid and result_at, no outcome), for the settling at commit
-- to take it off that result's count. Counting down at commit, after the transaction's other
-- settling, takes the locks on these rows last and in key order, as pushes take them (each
-- push locks the rows of its dependencies in dep order, after the jobs it marks): two
-- transactions deleting dependents of the same results in any order wait for each other at
-- most. Otherwise as in 0016_note_settlings.sql.
ALTER TABLE werk_settlings
    ADD COLUMN result_at timestamptz,
    ADD CONSTRAINT werk_settlings_released_result CHECK (result_at IS NULL OR outcome IS NULL);

CREATE OR REPLACE FUNCTION werk_job_changes_note() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    was text := werk_batch_member(NEW.before);
    now_ text := CASE WHEN NEW.after IS NOT NULL THEN werk_batch_member(NEW.after)
                       WHEN werk_batch_member(NEW.before) = 'pending' THEN 'dead'
                       ELSE werk_batch_member(NEW.before) END;
    moved_at timestamptz := CASE WHEN NEW.after IS NULL THEN now()
                                 ELSE coalesce(NEW.finished_at, now()) END;
BEGIN
    IF NEW.after IS NULL AND NEW.dependencies THEN
        WITH gone AS (
            DELETE FROM werk_job_deps e WHERE e.jid = NEW.jid RETURNING e.dep, e.result_at
        )
        INSERT INTO werk_settlings (jid, result_at, at)
        SELECT g.dep, g.result_at, moved_at FROM gone g WHERE g.result_at IS NOT NULL;
        IF FOUND THEN
            PERFORM set_config('werk.settling', 'on', true);
        END IF;
    END IF;
    IF NEW.dependents AND was = 'pending' AND now_ <> 'pending' THEN
        INSERT INTO werk_settlings (jid, outcome, result, at)
        VALUES (NEW.jid, coalesce(NEW.after::text, 'deleted'),
                CASE WHEN NEW.after = 'completed' THEN NEW.result END, moved_at);
        PERFORM set_config('werk.settling', 'on', true);
    END IF;
    IF NEW.batch IS NOT NULL AND was <> now_ THEN
        INSERT INTO werk_settlings (bid, d_succeeded, d_dead, died, at)
        VALUES (NEW.batch, (now_ = 'succeeded')::int - (was = 'succeeded')::int,
                (now_ = 'dead')::int - (was = 'dead')::int, now_ = 'dead', moved_at);
        PERFORM set_config('werk.settling', 'on', true);
    END IF;
    RETURN NEW;
END
$$;

-- The settling at commit, as in 0015_settle_in_order.sql (with the setting of
-- 0024_settle_by_edge_lookups.sql), passing over the released results in the jobs it settles,
-- and then counting them off: the rows are locked first, in key order, and only then read again,
-- so the statement after the lock sees the count as the last transaction to change it left it
-- (a push adding edges, another deletion); the rows left without an edge are deleted, the
-- others counted down.
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
        WHERE w.state = 'waiting' AND w.jid IN (
            WITH RECURSIVE reached(jid, doomed) AS (
                SELECT e.jid, n.outcome <> 'completed' AND e.on_failure <> 'ignore'
                FROM unnest(noted) n JOIN werk_job_deps e ON e.dep = n.jid AND e.outcome IS NULL
                WHERE n.jid IS NOT NULL AND n.outcome IS NOT NULL
                UNION
                SELECT e.jid, e.on_failure <> 'ignore'
                FROM reached r JOIN werk_job_deps e ON e.dep = r.jid AND e.outcome IS NULL
                WHERE r.doomed
            )
            SELECT jid FROM reached
        )
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
        WHERE (r.dep, r.completed_at) IN (SELECT n.jid, n.result_at
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
        )
        UPDATE werk_dep_results r
        SET refs = r.refs - g.k
        FROM released g
        WHERE r.dep = g.jid AND r.completed_at = g.result_at AND r.refs > g.k;
    END IF;
    RETURN NULL;
END
$$;
