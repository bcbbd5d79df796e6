-- Browsing one state across queues (the dashboard's retries, scheduled and dead pages) needs no
-- entries for the hot states: available and active jobs are browsed per queue
-- (werk_jobs_queue_state_idx) or are few (active). Leaving them out saves an index write for every
-- push, claim and ack, and most of this index's growth under churn.
DROP INDEX werk_jobs_state_created_idx;
CREATE INDEX werk_jobs_state_created_idx ON werk_jobs (state, created_at, jid)
    WHERE state NOT IN ('available', 'active');
