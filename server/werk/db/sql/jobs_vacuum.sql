-- The job table is a churn table: every job is inserted, updated a few times and deleted within
-- seconds. Autovacuum wakes once a minute per database (autovacuum_naptime), long enough for a busy
-- queue to pile up a minute of dead rows and index entries; vacuuming it every few seconds keeps it
-- near the size of its live rows. Plain VACUUM: it blocks no reads or writes.
-- PARALLEL 0, as autovacuum does: with two indexes past min_parallel_index_scan_size a manual
-- VACUUM starts parallel workers for the index pass, which for a table kept this small cost more
-- CPU and more wall time than they save.
VACUUM (SKIP_LOCKED, PARALLEL 0) werk_jobs
