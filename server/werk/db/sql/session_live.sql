-- Whether session $1 of token $2 is live: logged in, not logged out, not expired, and younger
-- than $3 seconds (the lifetime configured now, which may be shorter than when it was issued).
SELECT EXISTS (
    SELECT FROM werk_sessions
    WHERE id = $1 AND holder = $2
      AND expires_at > coalesce($4::timestamptz, now())
      AND created_at > coalesce($4::timestamptz, now()) - make_interval(secs => $3::float8)
)
