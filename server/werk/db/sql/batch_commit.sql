-- Commit batch $1 at $2 (NULL = database clock): no more members join until it is opened again;
-- with no member pending it finishes now, and its callbacks are released (werk_batch_move,
-- 0014_batches.sql). A batch committed already is left as it is. Answers a row if the batch
-- exists.
SELECT b.bid,
       CASE WHEN NOT b.committed
            THEN werk_batch_move(b.bid, 0, 0, true, false, coalesce($2::timestamptz, now()))
       END IS NULL AS done
FROM werk_batches b
WHERE b.bid = $1
