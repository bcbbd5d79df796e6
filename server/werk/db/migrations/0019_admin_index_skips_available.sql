-- Every pushed job wrote three index entries: its primary key, its place in the claim index
-- (werk_jobs_claim_idx) and werk_jobs_queue_state_idx, which only operators' pages and counts
-- read. Available jobs are left out of the last, as 0005 left active jobs out: the operators'
-- queries read them from the claim index, which holds every available job per queue in the order
-- workers take them, and list them in that order.
DROP INDEX werk_jobs_queue_state_idx;
CREATE INDEX werk_jobs_queue_state_idx ON werk_jobs (queue, state, created_at, jid)
    WHERE state NOT IN ('active', 'available');
