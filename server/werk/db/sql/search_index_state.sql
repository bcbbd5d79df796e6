-- Whether werk_jobs_available_words_idx (search_index_create.sql) is in place: NULL when it is
-- not there, false while it is being built or when a build stopped before the end (the index
-- is then left invalid: PostgreSQL keeps it up to date on writes but reads nothing from it),
-- true when searches read it.
SELECT (SELECT i.indisvalid
        FROM pg_index i
        WHERE i.indexrelid = to_regclass('werk_jobs_available_words_idx')) AS valid
