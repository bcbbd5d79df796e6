-- Count a new child batch as a member of its parent $1, only while the parent is not committed
-- (the update waits for the parent's row lock and sees a commit made meanwhile). Answers the
-- parent's bid, or nothing (not found or committed).
UPDATE werk_batches
SET total = total + 1
WHERE bid = $1 AND NOT committed
RETURNING bid
