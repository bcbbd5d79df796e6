-- Ask live workers ($1 wids; NULL = every live worker) to quiet or terminate ($2). The state only
-- moves forward (running -> quiet -> terminate, the enum's order); each worker learns it from its
-- next beat. Returns the workers whose state changed.
UPDATE werk_workers
SET state = $2::werk_worker_state
WHERE gone_at IS NULL
  AND ($1::text[] IS NULL OR wid = ANY($1::text[]))
  AND state < $2::werk_worker_state
RETURNING wid, state::text AS state
