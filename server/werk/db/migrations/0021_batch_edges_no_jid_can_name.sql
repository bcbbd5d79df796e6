-- A batch's callbacks wait on edges named "<bid>/complete", "/success" and "/death", where they
-- were named "<bid>:complete" and so on (0014_batches.sql). A dependency edge is named by the jid
-- it waits for, and a jid may hold a colon: a job pushed with the jid "<bid>:success" settled
-- that edge when it settled, releasing or skipping another batch's callback. No jid holds a
-- slash (JID_PATTERN, domain/job.py; the SQL interface checks the same), so no job can settle these edges.

UPDATE werk_job_deps d
SET dep = b.bid || '/' || e.kind
FROM werk_batches b
CROSS JOIN LATERAL (VALUES ('complete', b.complete_jid), ('success', b.success_jid),
                           ('death', b.death_jid)) AS e(kind, jid)
WHERE d.jid = e.jid AND d.dep = b.bid || ':' || e.kind;

-- As 0014_batches.sql's, but for the edges' names.
CREATE OR REPLACE FUNCTION werk_batch_move(
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
        PERFORM werk_dependencies_settle(moved_bid || '/death', 'completed', NULL, moved_at);
    END IF;
    IF b.completed_at IS NULL AND n.completed_at IS NOT NULL THEN
        PERFORM werk_dependencies_settle(moved_bid || '/complete', 'completed', NULL, moved_at);
    END IF;
    IF b.succeeded_at IS NULL AND n.succeeded_at IS NOT NULL THEN
        PERFORM werk_dependencies_settle(moved_bid || '/success', 'completed', NULL, moved_at);
        IF n.died_at IS NULL THEN
            PERFORM werk_dependencies_settle(moved_bid || '/death', 'skipped', NULL, moved_at);
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
