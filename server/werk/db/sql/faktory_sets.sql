-- The sizes of Faktory's sets for INFO: scheduled (future `at`, never failed), retries (waiting out
-- a backoff after a failure), dead, and working (held by a worker).
SELECT count(*) FILTER (WHERE state = 'scheduled' AND failed_at IS NULL) AS scheduled,
       count(*) FILTER (WHERE state = 'scheduled' AND failed_at IS NOT NULL) AS retries,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       count(*) FILTER (WHERE state = 'active') AS working
FROM werk_jobs
WHERE state IN ('scheduled', 'dead', 'active')
