-- The statements that settle or delete jobs note what matters to dependents and batches
-- themselves, instead of two row triggers on werk_jobs.
--
-- A row trigger on werk_jobs, even one whose WHEN clause is false for the row, makes
-- PostgreSQL fetch the old version of every row an UPDATE OF state or a DELETE touches and
-- evaluate the condition: every claim, ack and failure paid for it, for jobs without dependents
-- or batch too. Now each statement that can settle a job, delete one, or move a batch member
-- back to pending (the list is kept by tests/integration/test_settling_paths.py) writes the
-- jobs it changed that carry dependents or dependencies (every batch member is marked as
-- depended on) into werk_job_changes, with the state each had before; the trigger on that view
-- does what the row triggers did: note the settling in werk_settlings (settled at commit, in
-- lock order, by 0015_settle_in_order.sql), or drop the edges of a deleted dependent. A
-- statement that changes no such job writes no row, and nothing is called.
DROP TRIGGER werk_jobs_dependencies ON werk_jobs;
DROP TRIGGER werk_jobs_batch ON werk_jobs;
DROP FUNCTION werk_jobs_dependencies_trigger();
DROP FUNCTION werk_jobs_batch_trigger();

-- One row per job changed: its state before and after (after NULL: deleted), its flags, and
-- its result and finished_at after. Nothing is stored: the trigger below takes each row.
CREATE VIEW werk_job_changes AS
SELECT NULL::text COLLATE "C" AS jid,
       NULL::werk_job_state AS before,
       NULL::werk_job_state AS after,
       NULL::boolean AS dependents,
       NULL::boolean AS dependencies,
       NULL::text COLLATE "C" AS batch,
       NULL::jsonb AS result,
       NULL::timestamptz AS finished_at
WHERE false;

-- A job with dependents that settled, or was deleted unsettled, is noted for its dependents
-- (with its result if completed); a batch member that changed how it stands in its batch is
-- noted for its batch (one deleted before it settled ended without completing); a deleted job's
-- own edges go with it. The setting werk.settling tells the deferred settling that something is
-- noted (0015_settle_in_order.sql).
CREATE FUNCTION werk_job_changes_note() RETURNS trigger
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
        DELETE FROM werk_job_deps WHERE jid = NEW.jid;
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

CREATE TRIGGER werk_job_changes_note
INSTEAD OF INSERT ON werk_job_changes
FOR EACH ROW
EXECUTE FUNCTION werk_job_changes_note();

-- The waiting jobs this settling finishes are noted in turn (their own dependents and batches
-- are settled next, before the commit ends). Otherwise as in 0015_settle_in_order.sql.
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

-- The SQL interface's ack and fail (0013_sql_interface.sql) note the job they settled or
-- deleted the same way: each locks the job its lease holds first (as the attempt itself then
-- does), so that its flags cannot change under it, and notes how it ended. The attempts
-- themselves are unchanged, moved to a schema of their own (their bodies name their
-- parameters by the function's name, so they keep it).
CREATE SCHEMA werk_attempt;
REVOKE ALL ON SCHEMA werk_attempt FROM PUBLIC;
ALTER FUNCTION werk.ack(text, text, jsonb) SET SCHEMA werk_attempt;
ALTER FUNCTION werk.fail(text, text, jsonb) SET SCHEMA werk_attempt;

-- The job `lease` (as the interface takes it) holds, locked; NULL when none.
CREATE FUNCTION werk._held(jid text, lease text) RETURNS werk_jobs
LANGUAGE sql AS $$
    SELECT j FROM werk_jobs j
    WHERE j.jid = _held.jid
      AND j.lease = CASE WHEN _held.lease
                                  ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
                         THEN _held.lease::uuid END
    FOR UPDATE
$$;

-- Note held (the job as it was before an attempt ended) as it stands now.
CREATE FUNCTION werk._note(held werk_jobs) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO werk_job_changes (jid, before, after, dependents, dependencies, batch, result,
                                  finished_at)
    SELECT held.jid, held.state, j.state, held.dependents, held.dependencies, held.batch,
           j.result, j.finished_at
    FROM (SELECT) o LEFT JOIN werk_jobs j ON j.jid = held.jid
    WHERE held.dependents OR held.dependencies
$$;

CREATE FUNCTION werk.ack(jid text, lease text, result jsonb DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    held werk_jobs := werk._held(jid, lease);
BEGIN
    IF NOT werk_attempt.ack(jid, lease, result) THEN
        RETURN false;
    END IF;
    PERFORM werk._note(held);
    RETURN true;
END
$$;

CREATE FUNCTION werk.fail(jid text, lease text, error jsonb DEFAULT '{}') RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    held werk_jobs := werk._held(jid, lease);
    outcome text := werk_attempt.fail(jid, lease, error);
BEGIN
    IF outcome IS NOT NULL THEN
        PERFORM werk._note(held);
    END IF;
    RETURN outcome;
END
$$;

-- As 0013_sql_interface.sql: a fixed search path, nothing for PUBLIC, the interface for
-- werk_app, and the attempts themselves for nobody but through it.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = 'werk'::regnamespace
               AND p.proname IN ('ack', 'fail', '_held', '_note') LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'werk_app') THEN
        REVOKE EXECUTE ON FUNCTION werk_attempt.ack(text, text, jsonb),
            werk_attempt.fail(text, text, jsonb) FROM werk_app;
        GRANT EXECUTE ON FUNCTION werk.ack(text, text, jsonb), werk.fail(text, text, jsonb)
            TO werk_app;
    END IF;
END
$$;
