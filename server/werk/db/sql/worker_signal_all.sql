-- Ask every live worker to quiet or terminate ($1). The state only moves forward (running ->
-- quiet -> terminate, the enum's order); each worker learns it from its next beat. Returns the
-- workers whose state changed.
UPDATE werk_workers
SET state = $1::werk_worker_state
WHERE gone_at IS NULL AND state < $1::werk_worker_state
RETURNING wid
