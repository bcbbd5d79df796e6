-- A claim changes a job's state to active, so it is never a HOT update: it writes a new entry into
-- every index whose key or predicate admits the active row. Two indexes paid that on every claim
-- for operators' queries only: werk_jobs_queue_state_idx (full) and werk_jobs_active_wid_idx.
-- Active jobs are left out of the first and the second is dropped: active jobs are few (bounded
-- by the workers' concurrency) and werk_jobs_active_idx still holds them all, so the queries
-- about them read that index instead.
DROP INDEX werk_jobs_queue_state_idx;
CREATE INDEX werk_jobs_queue_state_idx ON werk_jobs (queue, state, created_at, jid)
    INCLUDE (enqueued_at)
    WHERE state <> 'active';
DROP INDEX werk_jobs_active_wid_idx;
