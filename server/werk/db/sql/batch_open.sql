-- Open batch $1 again, so more members may join, unless it has finished (a batch with a member
-- still pending cannot have finished: a member may always open its own batch). Answers its bid,
-- or nothing (not found or finished).
UPDATE werk_batches
SET committed = false, committed_at = NULL
WHERE bid = $1 AND completed_at IS NULL
RETURNING bid
