-- The job table is a churn table: every job is inserted, updated a few times and deleted within
-- seconds. Autovacuum wakes once a minute per database (autovacuum_naptime), long enough for a busy
-- queue to pile up a minute of dead rows and index entries; vacuuming it every few seconds keeps it
-- near the size of its live rows. Plain VACUUM: it blocks no reads or writes.
VACUUM (SKIP_LOCKED) werk_jobs
