-- The batches $1 (an array of bids), each with how it stands, its callbacks' states (NULL: no
-- callback, or pruned) and its child batches (the first 1000, oldest first).
SELECT b.bid, b.description, b.parent, b.created_at, b.committed, b.committed_at, b.total,
       b.succeeded, b.dead, b.total - b.succeeded - b.dead AS pending,
       b.completed_at, b.succeeded_at, b.died_at,
       b.complete_jid, c.state::text AS complete_state,
       b.success_jid, s.state::text AS success_state,
       b.death_jid, d.state::text AS death_state,
       ARRAY(SELECT k.bid FROM werk_batches k WHERE k.parent = b.bid
             ORDER BY k.created_at, k.bid LIMIT 1000)::text[] AS children
FROM werk_batches b
LEFT JOIN werk_stored_jobs c ON c.jid = b.complete_jid
LEFT JOIN werk_stored_jobs s ON s.jid = b.success_jid
LEFT JOIN werk_stored_jobs d ON d.jid = b.death_jid
WHERE b.bid = ANY ($1::text[])
ORDER BY b.created_at DESC, b.bid DESC
