-- The job table's pass between whole ones (jobs_vacuum.sql): the heap only. It prunes the dead
-- rows and frees their room for new ones, leaving a dead line pointer for each, and the
-- index entries that point at it, until the next whole pass. It reads no index, so its cost
-- follows the pages that changed, not the jobs kept (a whole pass reads every index in full,
-- and the key and the job lists' indexes hold every kept job).
VACUUM (SKIP_LOCKED, INDEX_CLEANUP OFF) werk_jobs
