-- Job dependencies: a job pushed with depends_on waits in the new state waiting until each of
-- its dependencies is settled, and one edge row per dependency says how it ended.
--
-- skipped: a finished state, never run, for a job whose dependency ended badly under the policy
-- skip (or was itself skipped). Both values go at the end of the type, which keeps its values
-- in the order of their OIDs: PostgreSQL then compares two states by OID, not by a lookup of
-- the type's sort order.
ALTER TYPE werk_job_state ADD VALUE 'waiting';
ALTER TYPE werk_job_state ADD VALUE 'skipped';

CREATE TYPE werk_dependency_policy AS ENUM ('fail', 'skip', 'ignore');

-- On the job, three columns, NULL on every job that does not use them (adding them rewrites
-- nothing, and the jobs of the hot path store no more than before):
-- waiting_for: while waiting, how many dependencies are not settled; the statement that settles
--   the last one finds it at 1 under the row lock, so it is released exactly once.
-- dependents: true once a job depending on this one was pushed. Only such a job's settling
--   looks for dependents (the trigger below is not even called for any other).
-- dependencies: true on a job pushed with depends_on; its edges go with it.
ALTER TABLE werk_jobs
    ADD COLUMN waiting_for integer CHECK (waiting_for > 0),
    ADD COLUMN dependents boolean,
    ADD COLUMN dependencies boolean;

-- The values added above cannot be named in this transaction (PostgreSQL's rule for a value
-- added to an enum), and the checks are evaluated on every row written, so they compare states
-- for equality only: a job counting dependencies (waiting_for) is unfinished, and is in none of
-- the other states, so it is waiting (skipped is finished); every other job is finished
-- exactly outside the three states a job runs through.
ALTER TABLE werk_jobs DROP CONSTRAINT werk_jobs_finished_iff_terminal,
    ADD CONSTRAINT werk_jobs_finished_iff_terminal CHECK (
        (state NOT IN ('scheduled', 'available', 'active') AND waiting_for IS NULL)
        = (finished_at IS NOT NULL)
    ),
    ADD CONSTRAINT werk_jobs_waiting_for_only_waiting CHECK (
        waiting_for IS NULL
        OR state NOT IN ('scheduled', 'available', 'active', 'completed', 'dead', 'cancelled',
                         'expired')
    ),
    ADD CONSTRAINT werk_jobs_waiting_has_dependencies CHECK (
        waiting_for IS NULL OR dependencies
    );

-- One row per edge: job depends on dep. outcome is NULL while dep is not settled, then how dep
-- ended: completed (with its result: the dependency itself may be deleted at its ack, its
-- result stays here for the dependent), dead, expired, cancelled, skipped, or deleted (an
-- operator deleted it before it settled). The edges of a job are deleted with it.
-- The primary key (dep, jid) makes releasing the dependents of a settled job one key lookup;
-- werk_job_deps_job_idx reads a job's dependencies (its fetch, its page, its deletion).
CREATE TABLE werk_job_deps (
    dep        werk_jid COLLATE "C" NOT NULL,
    jid        werk_jid COLLATE "C" NOT NULL,
    ref        text CHECK (length(ref) BETWEEN 1 AND 100),
    on_failure werk_dependency_policy NOT NULL,
    outcome    text CHECK (outcome IN ('completed', 'dead', 'expired', 'cancelled', 'skipped',
                                       'deleted')),
    result     jsonb,
    settled_at timestamptz,
    CHECK ((outcome IS NULL) = (settled_at IS NULL)),
    CHECK (result IS NULL OR outcome = 'completed'),
    CHECK (dep <> jid),
    PRIMARY KEY (dep, jid)
) WITH (fillfactor = 80);
CREATE INDEX werk_job_deps_job_idx ON werk_job_deps (jid);

-- Settle the edges out of settled_jid, which ended as settled_outcome at settled_at (with
-- settled_result when completed), and release or finish its dependents, all in one statement:
-- a dependent whose last unsettled dependency this was becomes available (or scheduled, for an
-- `at` still to come), queued from settled_at; a dependency that ended badly finishes its dependents by their policy (fail:
-- dead, naming the cause; skip: skipped; ignore: counts as settled), and so on down the graph:
-- the dependents finished here are settled here too, so nothing is left waiting. A skipped
-- dependency skips its dependents under the policy fail too (skipping is not a failure).
-- A dependent that is no longer waiting (finished by another dependency meanwhile) is left as
-- it is; the row lock on each dependent makes concurrent settlings of its last dependencies
-- count down one after the other, so exactly one of them releases it.
-- (Its body names the states added above: it is checked when first called, not here.)
SET LOCAL check_function_bodies = off;
CREATE FUNCTION werk_dependencies_settle(
    settled_jid text, settled_outcome text, settled_result jsonb, settled_at timestamptz
) RETURNS void
LANGUAGE sql VOLATILE AS $$
    WITH RECURSIVE doomed(jid, fate, cause) AS (
        SELECT e.jid,
               CASE WHEN e.on_failure = 'fail' AND settled_outcome <> 'skipped' THEN 'dead'
                    ELSE 'skipped' END,
               format('dependency %s %s', settled_jid, settled_outcome)
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
        RETURNING w.queue, w.state
    )
    -- Fetches waiting on any node for the queues of the jobs released are woken (the payload
    -- of notify.sql, from no node).
    SELECT pg_notify('werk_jobs', '|' || string_agg(q.queue || ':' || q.n, ','))
    FROM (SELECT queue, count(*) AS n FROM changed WHERE state = 'available' GROUP BY queue) q
    HAVING count(*) > 0
$$;

-- Whenever a job with dependents settles or is deleted, and whenever a job with dependencies is
-- deleted, on every path (ack, fail, lease expiry, expiry, an operator's kill, cancel or
-- delete, a queue cleared, FWP, SQL): its dependents are released or finished, or its own
-- edges go, in the transaction that changed it. The WHEN clause is all a job without either
-- flag pays: no call, no queued event.
CREATE FUNCTION werk_jobs_dependencies_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.dependencies THEN
            DELETE FROM werk_job_deps WHERE jid = OLD.jid;
        END IF;
        IF OLD.dependents AND OLD.state IN ('scheduled', 'available', 'active', 'waiting') THEN
            PERFORM werk_dependencies_settle(OLD.jid, 'deleted', NULL, now());
        END IF;
    ELSIF OLD.dependents
          AND NEW.state NOT IN ('scheduled', 'available', 'active', 'waiting')
          AND OLD.state IN ('scheduled', 'available', 'active', 'waiting') THEN
        PERFORM werk_dependencies_settle(NEW.jid, NEW.state::text,
                                         CASE WHEN NEW.state = 'completed' THEN NEW.result END,
                                         NEW.finished_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER werk_jobs_dependencies
AFTER UPDATE OF state OR DELETE ON werk_jobs
FOR EACH ROW WHEN (OLD.dependents OR OLD.dependencies)
EXECUTE FUNCTION werk_jobs_dependencies_trigger();

-- An edge inserted to a dependency that had already ended badly (a push naming a dead job, say)
-- applies its policy at once, through the same settling.
CREATE FUNCTION werk_job_deps_inserted_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM werk_dependencies_settle(j.jid, j.state::text, NULL,
                                     (SELECT max(w.created_at) FROM werk_jobs w
                                      WHERE w.jid IN (SELECT a.jid FROM added a)))
    FROM werk_jobs j
    WHERE j.jid IN (SELECT a.dep FROM added a WHERE a.outcome IS NULL)
      AND j.state IN ('dead', 'expired', 'cancelled', 'skipped');
    RETURN NULL;
END
$$;

CREATE TRIGGER werk_job_deps_inserted
AFTER INSERT ON werk_job_deps
REFERENCING NEW TABLE AS added
FOR EACH STATEMENT
EXECUTE FUNCTION werk_job_deps_inserted_trigger();
