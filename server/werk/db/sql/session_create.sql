-- Record a login: session $1 (the SHA-256 of the cookie's id) of token $2, for $3 seconds.
INSERT INTO werk_sessions (id, holder, created_at, expires_at)
VALUES ($1, $2, coalesce($4::timestamptz, now()),
        coalesce($4::timestamptz, now()) + make_interval(secs => $3::float8))
