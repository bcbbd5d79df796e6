-- Job results: an ack may store what the job produced, and a job pushed with keep_result_for
-- stays readable as completed for that long after its ack.
--
-- keep_result_for: seconds a completed job is kept (NULL: deleted at ack, unless
-- WERK_COMPLETED_RETENTION keeps every completed job).
-- result: what the worker's ack carried (NULL: nothing).
-- keep_until: set at ack on the jobs kept: finished_at plus keep_result_for. The maintenance pass
-- deletes a completed job once keep_until lies WERK_COMPLETED_RETENTION in the past, in
-- keep_until order, so the deletion reads an index range of exactly the jobs due.
-- All three are NULL on the jobs that do not use them: adding them rewrites nothing, and the
-- jobs of the hot path store no more than before.
CREATE DOMAIN werk_keep_result_for AS integer CHECK (VALUE BETWEEN 1 AND 31536000);
ALTER TABLE werk_jobs
    ADD COLUMN keep_result_for werk_keep_result_for,
    ADD COLUMN result jsonb,
    ADD COLUMN keep_until timestamptz;
-- Completed jobs kept before this migration were kept for WERK_COMPLETED_RETENTION alone.
UPDATE werk_jobs SET keep_until = finished_at WHERE state = 'completed';
-- Pruning completed jobs. Only completed jobs are in it: the claim index
-- (werk_jobs_claim_idx, available jobs only) and the lease index (active jobs only) never hold a
-- completed job, however many are kept.
CREATE INDEX werk_jobs_completed_idx ON werk_jobs (keep_until) WHERE state = 'completed';
