-- Settlings take their locks in one fixed order, so that two transactions settling jobs with
-- dependents or batches in common never wait for each other in a cycle.
--
-- The row triggers of 0012_dependencies.sql and 0014_batches.sql settled each row as it came:
-- a statement completing members of batches a and b locked a then b, another completing members
-- of b and a locked b then a, and each waited for the other (so too for shared dependents).
-- Now a row trigger only notes what settled, and the transaction settles everything it noted
-- as it commits: first the waiting dependents are locked in jid order and released or
-- finished, then the batches moved, with their ancestors, are locked children first (a child
-- before its parent, as a commit and the climb of werk_batch_move take them), then by bid, and
-- counted. What that settling changes in turn (a member finished by its dependency's policy, a
-- callback released) is settled next, before the commit ends, in the same order. Settling at
-- commit also holds those locks for the shortest time, and a statement that changes no job with
-- dependents or batch pays nothing (no trigger is called for it).

-- What the row triggers noted and the transaction has not settled yet, by transaction: a job that
-- settled or was deleted unsettled (jid, with how it ended and its result), or a member that
-- moved in its batch (bid, with the change of its counts). Rows live only inside the
-- transaction that writes them (its commit deletes them), so the table is unlogged.
CREATE UNLOGGED TABLE werk_settlings (
    xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    jid         text COLLATE "C",
    outcome     text,
    result      jsonb,
    bid         text COLLATE "C",
    d_succeeded integer,
    d_dead      integer,
    died        boolean,
    at          timestamptz NOT NULL,
    CHECK ((jid IS NULL) <> (bid IS NULL))
);
CREATE INDEX werk_settlings_xid_idx ON werk_settlings (xid);

-- The deferred trigger below runs at commit once per row noted; this setting, local to the
-- transaction, tells it in one comparison whether anything is left to settle, so the first call
-- settles everything and the others return at once.
CREATE OR REPLACE FUNCTION werk_jobs_dependencies_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.dependencies THEN
            DELETE FROM werk_job_deps WHERE jid = OLD.jid;
        END IF;
        IF OLD.dependents AND OLD.state IN ('scheduled', 'available', 'active', 'waiting') THEN
            INSERT INTO werk_settlings (jid, outcome, at) VALUES (OLD.jid, 'deleted', now());
            PERFORM set_config('werk.settling', 'on', true);
        END IF;
    ELSIF OLD.dependents
          AND NEW.state NOT IN ('scheduled', 'available', 'active', 'waiting')
          AND OLD.state IN ('scheduled', 'available', 'active', 'waiting') THEN
        INSERT INTO werk_settlings (jid, outcome, result, at)
        VALUES (NEW.jid, NEW.state::text, CASE WHEN NEW.state = 'completed' THEN NEW.result END,
                NEW.finished_at);
        PERFORM set_config('werk.settling', 'on', true);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION werk_jobs_batch_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    before text := werk_batch_member(OLD.state);
    after text;
    moved_at timestamptz;
BEGIN
    IF TG_OP = 'DELETE' THEN
        after := CASE WHEN before = 'pending' THEN 'dead' ELSE before END;
        moved_at := now();
    ELSE
        after := werk_batch_member(NEW.state);
        moved_at := coalesce(NEW.finished_at, now());
    END IF;
    IF before <> after THEN
        INSERT INTO werk_settlings (bid, d_succeeded, d_dead, died, at)
        VALUES (OLD.batch, (after = 'succeeded')::int - (before = 'succeeded')::int,
                (after = 'dead')::int - (before = 'dead')::int, after = 'dead', moved_at);
        PERFORM set_config('werk.settling', 'on', true);
    END IF;
    RETURN NULL;
END
$$;

-- Settle what this transaction noted: dependents, then batches, each locked in the order above
-- before any is changed. A settled job that no unsettled edge names (every member
-- is marked as depended on, for its batch) has nothing to release and is passed over.
CREATE FUNCTION werk_settlings_settle() RETURNS trigger
LANGUAGE plpgsql AS $$
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
    -- finishes (as werk_dependencies_settle walks them).
    PERFORM 1
    FROM werk_jobs w
    WHERE w.state = 'waiting' AND w.jid IN (
        WITH RECURSIVE reached(jid, doomed) AS (
            SELECT e.jid, n.outcome <> 'completed' AND e.on_failure <> 'ignore'
            FROM unnest(noted) n JOIN werk_job_deps e ON e.dep = n.jid AND e.outcome IS NULL
            WHERE n.jid IS NOT NULL
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
        WHERE n.jid IS NOT NULL
          AND EXISTS (SELECT 1 FROM werk_job_deps e WHERE e.dep = n.jid AND e.outcome IS NULL)
        ORDER BY n.jid
    LOOP
        PERFORM werk_dependencies_settle(s.jid, s.outcome, s.result, s.at);
    END LOOP;

    -- Every batch moved and its ancestors, children first: a batch's depth (how many ancestors
    -- it has) never changes, and a child is deeper than its parent.
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
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER werk_settlings_settle
AFTER INSERT ON werk_settlings
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW
EXECUTE FUNCTION werk_settlings_settle();

-- A waiting job expires like any other unstarted job once its expires_at has come
-- (job_expire.sql), and its dependents then follow their policy: the index the upkeep pass
-- reads covers waiting jobs too.
DROP INDEX werk_jobs_expires_idx;
CREATE INDEX werk_jobs_expires_idx ON werk_jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'available', 'waiting');

-- A job finished by its dependency's policy (dead or skipped) wakes the result polls waiting
-- for it on every node, as an ack does, instead of leaving them to the periodic re-check.
-- Otherwise as in 0012_dependencies.sql.
CREATE OR REPLACE FUNCTION werk_dependencies_settle(
    settled_jid text, settled_outcome text, settled_result jsonb, settled_at timestamptz
) RETURNS void
LANGUAGE sql VOLATILE AS $$
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
            result = CASE WHEN s.outcome = 'completed' THEN settled_result END,
            settled_at = werk_dependencies_settle.settled_at
        FROM sources s
        WHERE e.dep = s.dep AND e.outcome IS NULL
        RETURNING e.jid
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
        RETURNING w.jid, w.queue, w.state
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
