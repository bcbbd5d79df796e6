-- How deep batch $1 sits among its ancestors (1: it has no parent), counted up to $2 at most;
-- NULL when no such batch is stored.
WITH RECURSIVE up AS (
    SELECT parent, 1 AS depth FROM werk_batches WHERE bid = $1
    UNION ALL
    SELECT b.parent, u.depth + 1
    FROM werk_batches b JOIN up u ON b.bid = u.parent
    WHERE u.depth < $2
)
SELECT max(depth) FROM up
