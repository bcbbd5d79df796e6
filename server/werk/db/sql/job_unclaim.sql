-- Hand back jobs that a fetch reserved but could not deliver (its client had disconnected):
-- available again as if never fetched, in their old place in the queue (same priority and seq).
-- Only the lease that fetch got is undone; a job settled or re-reserved since is left alone.
--
-- A job locked unique until start gave its key up when the fetch took it (job_fetch.sql); not
-- having started, it takes the key back (unique_spec keeps the key it was pushed with), unless
-- $3 is false or another job holds that key by now: a push stored while this job was reserved,
-- its producer told it was stored. That job is kept and this one comes back without its lock:
-- dropping either would lose a job a producer was told is stored, and handing the key to this
-- one would leave the other outside the lock it was pushed under without anybody asking. Both
-- run, as they would have had the fetch's answer arrived. Among jobs handed back together with
-- the same key, the oldest (by seq) takes it. A push committing the key after this statement
-- looked makes the statement fail on werk_jobs_unique_idx having changed nothing; the caller
-- writes it again (it then sees that push), and at last with $3 false.
WITH back AS (
    SELECT j.jid, j.seq, j.unique_spec ->> 'key' AS key,
           j.unique_key IS NULL AND j.unique_spec ->> 'until' = 'start' AS released
    FROM werk_jobs j
    JOIN unnest($1::text[], $2::uuid[]) AS u(jid, lease) ON j.jid = u.jid AND j.lease = u.lease
    -- (Only an active job holds a lease: werk_jobs_lease_iff_active. See job_ack.sql for why
    -- the state is not named.)
    FOR UPDATE OF j
),
relocked AS (
    SELECT DISTINCT ON (b.key) b.jid, b.key
    FROM back b
    WHERE $3::boolean AND b.released
      AND NOT EXISTS (
          SELECT 1 FROM werk_jobs h
          WHERE h.unique_key = b.key AND h.state IN ('scheduled', 'available', 'active')
      )
    ORDER BY b.key, b.seq
)
UPDATE werk_jobs j
SET state = 'available', attempt = j.attempt - 1, lease = NULL, lease_expires_at = NULL, wid = NULL,
    unique_key = coalesce(r.key, j.unique_key)
FROM back b LEFT JOIN relocked r ON r.jid = b.jid
WHERE j.jid = b.jid
RETURNING j.queue
