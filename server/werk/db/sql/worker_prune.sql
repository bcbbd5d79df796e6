-- Forget worker processes gone for more than $2 seconds (their leases were released long ago).
DELETE FROM werk_workers
WHERE gone_at < coalesce($1::timestamptz, now()) - make_interval(secs => $2::float8)
