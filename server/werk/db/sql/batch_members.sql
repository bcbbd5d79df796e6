-- The first $2 member jobs still stored of batch $1, oldest first (the batch's page).
SELECT j.jid, j.jobtype, j.queue, j.state::text AS state, j.created_at
FROM werk_stored_jobs j
WHERE j.batch = $1
ORDER BY j.created_at, j.jid
LIMIT $2
