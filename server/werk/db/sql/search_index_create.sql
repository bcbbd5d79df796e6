-- The words index (werk_jobs_words_idx, migration 0011) over the available jobs, which that
-- index leaves out: made only where the operator asks for it (WERK_SEARCH_AVAILABLE), as each
-- push then writes the words of its jobs into it. CONCURRENTLY, so that pushes, fetches and
-- acks go on while it is built over a backlog; it runs outside any transaction. No migration
-- makes it, so a migration that changes werk_job_words must drop it where it exists (DROP INDEX
-- IF EXISTS): the nodes with the setting build it again over the new words (at start-up, and
-- in their upkeep when they find it missing).
CREATE INDEX CONCURRENTLY IF NOT EXISTS werk_jobs_available_words_idx ON werk_jobs
    USING gin (werk_job_words(errtype, message, args, custom))
    WHERE state = 'available'
