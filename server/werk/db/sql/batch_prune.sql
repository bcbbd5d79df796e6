-- Retention of batches, a bounded batch ($3) at a time: a batch finished more than $2 seconds
-- ago whose members and child batches are all gone (pruned or deleted), so that nothing can
-- change it any more, goes, with its callbacks still waiting (an on_success that a dead member
-- kept from running, and now never will). A parent goes after its children, on a later pass.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS now
),
gone AS (
    SELECT b.bid, b.complete_jid, b.success_jid, b.death_jid
    FROM werk_batches b, clock c
    WHERE b.completed_at < c.now - make_interval(secs => $2::float8)
      AND NOT EXISTS (SELECT 1 FROM werk_stored_jobs j WHERE j.batch = b.bid)
      AND NOT EXISTS (SELECT 1 FROM werk_batches k WHERE k.parent = b.bid)
    ORDER BY b.completed_at
    LIMIT $3
    FOR UPDATE OF b SKIP LOCKED
),
callbacks AS (
    DELETE FROM werk_jobs w
    USING gone g
    WHERE w.jid IN (g.complete_jid, g.success_jid, g.death_jid) AND w.state = 'waiting'
    RETURNING w.jid, w.dependents, w.dependencies, w.batch
),
noted AS (
    INSERT INTO werk_job_changes (jid, before, dependents, dependencies, batch)
    SELECT jid, 'waiting', dependents, dependencies, batch
    FROM callbacks WHERE dependents OR dependencies
)
DELETE FROM werk_batches b
USING gone g
WHERE b.bid = g.bid
RETURNING b.bid
