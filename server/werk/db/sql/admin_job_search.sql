-- What an operator's search asks and where it reads the available jobs from: the part that fills
-- the search marker of the job pages (admin_job_list.sql) and of the bulk actions
-- (admin_job_act.sql), whose $4 is q, so that a page and "... all" over it find the same jobs
-- the same way. Two CTEs of the statement's WITH.
-- search: the words of q as a query of the words indexes (werk_job_search), computed once.
search AS (
    SELECT werk_job_search($4::text) AS words
),
-- indexed: whether werk_jobs_available_words_idx (search_index_create.sql) is there and valid:
-- one being built, or left invalid by a build that stopped, is not read, and the available jobs
-- are then walked. Decided as the statement runs, so that a plan made before the index was
-- built, or while it is invalid, still answers.
indexed AS (
    SELECT coalesce(bool_and(i.indisvalid), false) AS valid
    FROM pg_index i
    WHERE i.indexrelid = to_regclass('werk_jobs_available_words_idx')
)
