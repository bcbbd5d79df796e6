-- The bids of up to $2 batches, newest first, after batch $1 (NULL: from the newest); $3 true:
-- only batches not finished.
SELECT b.bid
FROM werk_batches b
WHERE ($1::text IS NULL
       OR (b.created_at, b.bid) < (SELECT a.created_at, a.bid FROM werk_batches a
                                   WHERE a.bid = $1))
  AND (NOT $3::boolean OR b.completed_at IS NULL)
ORDER BY b.created_at DESC, b.bid DESC
LIMIT $2
