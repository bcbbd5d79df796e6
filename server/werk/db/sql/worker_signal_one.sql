-- Ask one live worker ($1) to quiet or terminate ($2); returns its state after, or no row when no
-- live worker has that wid. One statement, so the change and the answer see the same workers: a
-- worker whose first beat commits while this runs is either asked or not found (and the caller
-- asks again), never answered as found but left unasked.
WITH changed AS (
    UPDATE werk_workers
    SET state = $2::werk_worker_state
    WHERE gone_at IS NULL AND wid = $1 AND state < $2::werk_worker_state
    RETURNING state::text AS state
)
SELECT state FROM changed
UNION ALL
SELECT w.state::text
FROM werk_workers w
WHERE w.gone_at IS NULL AND w.wid = $1 AND NOT EXISTS (SELECT 1 FROM changed)
