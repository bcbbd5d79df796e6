-- Push the lease forward (by $4 seconds, else the job's reserve_for) and, when $6, store a
-- progress checkpoint that the next attempt receives.
UPDATE werk_jobs
SET lease_expires_at = coalesce($1::timestamptz, now())
                       + make_interval(secs => coalesce($4::int, reserve_for)),
    progress = CASE WHEN $6::boolean THEN $5::text::jsonb ELSE progress END
WHERE jid = $2 AND lease = $3::uuid AND state = 'active'
RETURNING lease_expires_at
