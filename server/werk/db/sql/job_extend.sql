-- Push the lease forward (by $4 seconds, else the job's reserve_for) and, when $6, store a
-- progress checkpoint that the next attempt receives.
UPDATE werk_jobs
SET lease_expires_at = coalesce($1::timestamptz, now())
                       + make_interval(secs => coalesce($4::int, reserve_for)),
    progress = CASE WHEN $6::boolean THEN $5::text::jsonb ELSE progress END
-- (Only an active job holds a lease: werk_jobs_lease_iff_active. See job_ack.sql for why the
-- state is not named.)
WHERE jid = $2 AND lease = $3::uuid
RETURNING lease_expires_at
