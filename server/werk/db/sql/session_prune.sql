-- Forget sessions that have expired (they can no longer be used).
DELETE FROM werk_sessions WHERE expires_at <= coalesce($1::timestamptz, now())
