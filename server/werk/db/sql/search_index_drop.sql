-- The search index over available jobs removed, without blocking the job traffic.
DROP INDEX CONCURRENTLY IF EXISTS werk_jobs_available_words_idx
