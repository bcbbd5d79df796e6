-- Batches (groups): a set of member jobs and child batches with callbacks that fire once, when
-- every member has settled (complete), when every member has completed (success), and when the
-- first member ends without completing (death).
--
-- A batch counts its members by how each stands now: succeeded (completed), dead (ended without
-- completing: dead, expired, cancelled, skipped, or deleted unfinished) and the rest pending
-- (total - succeeded - dead). A dead member retried by an operator is pending again, and
-- succeeded once it completes. A child batch is one member of its parent: pending while it is
-- open or has pending members, succeeded when every member of it succeeded, dead otherwise.
-- committed: no more members may join until the batch is opened again; a batch is finished
-- (completed_at) the first moment it is committed with no pending member, and is never opened
-- again after that.
CREATE TABLE werk_batches (
    bid          text COLLATE "C" PRIMARY KEY CHECK (length(bid) BETWEEN 8 AND 90),
    description  text CHECK (length(description) <= 1000),
    parent       text COLLATE "C" REFERENCES werk_batches (bid),
    created_at   timestamptz NOT NULL,
    committed    boolean NOT NULL DEFAULT false,
    committed_at timestamptz,
    total        integer NOT NULL DEFAULT 0 CHECK (total >= 0),
    succeeded    integer NOT NULL DEFAULT 0 CHECK (succeeded >= 0),
    dead         integer NOT NULL DEFAULT 0 CHECK (dead >= 0),
    -- The callback jobs (NULL: none given) and when each condition was first met.
    complete_jid text COLLATE "C",
    success_jid  text COLLATE "C",
    death_jid    text COLLATE "C",
    completed_at timestamptz,
    succeeded_at timestamptz,
    died_at      timestamptz,
    CHECK (succeeded + dead <= total),
    CHECK (committed = (committed_at IS NOT NULL)),
    CHECK (completed_at IS NULL OR committed),
    CHECK (succeeded_at IS NULL OR completed_at IS NOT NULL),
    CHECK (parent <> bid)
);
CREATE INDEX werk_batches_parent_idx ON werk_batches (parent) WHERE parent IS NOT NULL;
CREATE INDEX werk_batches_created_idx ON werk_batches (created_at DESC, bid DESC);
-- Retention reads finished batches oldest first (batch_prune.sql).
CREATE INDEX werk_batches_finished_idx ON werk_batches (completed_at)
    WHERE completed_at IS NOT NULL;

-- A member carries its batch's id. NULL on every other job: adding the column rewrites nothing,
-- and the index and trigger below see only members. A member is stored with dependents = true
-- (its batch depends on it), so an ack keeps it completed rather than deleting it, on every
-- path, and its batch counts it as succeeded, not as deleted.
ALTER TABLE werk_jobs ADD COLUMN batch text COLLATE "C";
CREATE INDEX werk_jobs_batch_idx ON werk_jobs (batch) WHERE batch IS NOT NULL;

-- How a member stands in its batch, by its state.
CREATE FUNCTION werk_batch_member(s werk_job_state) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN s IN ('scheduled', 'available', 'active', 'waiting') THEN 'pending'
                WHEN s = 'completed' THEN 'succeeded'
                ELSE 'dead' END
$$;

-- How a batch stands as a member of its parent.
CREATE FUNCTION werk_batch_standing(b werk_batches) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN NOT b.committed OR b.total > b.succeeded + b.dead THEN 'pending'
                WHEN b.succeeded = b.total THEN 'succeeded'
                ELSE 'dead' END
$$;

-- Count a member of batch moved_bid that changed how it stands (d_succeeded and d_dead: the
-- change of each count), or commit the batch (committing), or both; died: a member ended without
-- completing. Each condition met for the first time stamps its time and releases its callback
-- (a job waiting on the edge "<bid>:complete", ":success" or ":death", through the settling of
-- 0012_dependencies.sql); a batch that succeeded without a death skips its death callback. A
-- batch whose standing changed (or whose first death this was) is counted in its parent the
-- same way. The row lock taken first makes concurrent settlings of a batch's members count one
-- after the other, so each condition is met, and its callback released, by exactly one of
-- them; locks are always taken from a member up to its ancestors.
CREATE FUNCTION werk_batch_move(
    moved_bid text, d_succeeded integer, d_dead integer, committing boolean, died boolean,
    moved_at timestamptz
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b werk_batches;
    n werk_batches;
BEGIN
    SELECT * INTO b FROM werk_batches w WHERE w.bid = moved_bid FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    n := b;
    n.succeeded := b.succeeded + d_succeeded;
    n.dead := b.dead + d_dead;
    IF committing THEN
        n.committed := true;
        n.committed_at := moved_at;
    END IF;
    IF died AND b.died_at IS NULL THEN
        n.died_at := moved_at;
    END IF;
    IF n.committed AND n.total = n.succeeded + n.dead AND b.completed_at IS NULL THEN
        n.completed_at := moved_at;
    END IF;
    IF n.committed AND n.total = n.succeeded AND b.succeeded_at IS NULL THEN
        n.succeeded_at := moved_at;
    END IF;
    UPDATE werk_batches w
    SET succeeded = n.succeeded, dead = n.dead, committed = n.committed,
        committed_at = n.committed_at, died_at = n.died_at, completed_at = n.completed_at,
        succeeded_at = n.succeeded_at
    WHERE w.bid = moved_bid;
    IF b.died_at IS NULL AND n.died_at IS NOT NULL THEN
        PERFORM werk_dependencies_settle(moved_bid || ':death', 'completed', NULL, moved_at);
    END IF;
    IF b.completed_at IS NULL AND n.completed_at IS NOT NULL THEN
        PERFORM werk_dependencies_settle(moved_bid || ':complete', 'completed', NULL, moved_at);
    END IF;
    IF b.succeeded_at IS NULL AND n.succeeded_at IS NOT NULL THEN
        PERFORM werk_dependencies_settle(moved_bid || ':success', 'completed', NULL, moved_at);
        IF n.died_at IS NULL THEN
            PERFORM werk_dependencies_settle(moved_bid || ':death', 'skipped', NULL, moved_at);
        END IF;
    END IF;
    IF b.parent IS NOT NULL
       AND (werk_batch_standing(b) <> werk_batch_standing(n)
            OR (b.died_at IS NULL AND n.died_at IS NOT NULL)) THEN
        PERFORM werk_batch_move(
            b.parent,
            (werk_batch_standing(n) = 'succeeded')::int - (werk_batch_standing(b) = 'succeeded')::int,
            (werk_batch_standing(n) = 'dead')::int - (werk_batch_standing(b) = 'dead')::int,
            false,
            b.died_at IS NULL AND n.died_at IS NOT NULL,
            moved_at
        );
    END IF;
END
$$;

-- Whenever a member's state changes or it is deleted, on every path (ack, fail, lease expiry,
-- expiry, an operator's retry, kill, cancel or delete, a dependency's settling, FWP, SQL), its
-- batch counts it in the transaction that changed it. A member deleted before it settled ended
-- without completing. The WHEN clause is all a job outside batches pays.
CREATE FUNCTION werk_jobs_batch_trigger() RETURNS trigger
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
        PERFORM werk_batch_move(OLD.batch,
                                (after = 'succeeded')::int - (before = 'succeeded')::int,
                                (after = 'dead')::int - (before = 'dead')::int,
                                false, after = 'dead', moved_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER werk_jobs_batch
AFTER UPDATE OF state OR DELETE ON werk_jobs
FOR EACH ROW WHEN (OLD.batch IS NOT NULL)
EXECUTE FUNCTION werk_jobs_batch_trigger();
