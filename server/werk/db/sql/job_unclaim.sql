-- Hand back jobs that a fetch reserved but could not deliver (its client had disconnected):
-- available again as if never fetched, in their old place in the queue (same priority and seq).
-- Only the lease that fetch got is undone; a job settled or re-reserved since is left alone.
UPDATE werk_jobs j
SET state = 'available', attempt = j.attempt - 1, lease = NULL, lease_expires_at = NULL, wid = NULL
FROM unnest($1::text[], $2::uuid[]) AS u(jid, lease)
-- (Only an active job holds a lease: werk_jobs_lease_iff_active. See job_ack.sql for why the
-- state is not named.)
WHERE j.jid = u.jid AND j.lease = u.lease
RETURNING j.queue
