-- Searching jobs by their words, and the operators' job filter written once.
--
-- werk_job_words: the words of a job an operator searches for: of its errtype and message, and
-- of every string, number and boolean in its args and custom (object keys are not words). The
-- 'simple' configuration lowercases and stems nothing, so a word is found as it was written.
CREATE FUNCTION werk_job_words(errtype text, message text, args jsonb, custom jsonb)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('simple'::regconfig, coalesce(errtype, '') || ' ' || coalesce(message, ''))
           || jsonb_to_tsvector('simple'::regconfig, args, '["string", "numeric", "boolean"]')
           || jsonb_to_tsvector('simple'::regconfig, custom, '["string", "numeric", "boolean"]')
$$;

-- werk_job_search: what the operator's q asks, as a query of the words index: every word of q
-- (as the same parser splits it) must begin a word of the job. NULL when q holds no word. The
-- lexemes are quoted as tsquery input quotes them, so no character of q is read as an operator.
CREATE FUNCTION werk_job_search(q text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT string_agg('''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || ''':*',
                      ' & ')::tsquery
    FROM unnest(to_tsvector('simple'::regconfig, q)) AS w
$$;

-- The jobs waiting or running are left out, as from werk_jobs_state_created_idx: every push and
-- claim would otherwise write to this index, and every VACUUM after the churn would have to
-- clear their entries from it. Active jobs are few, and the pages read them through
-- werk_jobs_active_idx; available jobs are read per queue through werk_jobs_queue_state_idx.
CREATE INDEX werk_jobs_words_idx ON werk_jobs
    USING gin (werk_job_words(errtype, message, args, custom))
    WHERE state NOT IN ('available', 'active');

-- The filter of every operator's query over jobs (job pages and bulk actions), beside the
-- state, queue, cursor and jid bounds that each statement applies through its indexes: the
-- jobtype, the words of q (search: werk_job_search(q), computed once by the statement; a q
-- without a word matches nothing) and whether the job ever failed; NULL matches anything. A
-- plain SQL expression, so PostgreSQL inlines it into each statement and plans it as if written
-- there.
CREATE FUNCTION werk_job_filter(
    j werk_jobs, of_jobtype text, q text, search tsquery, has_failed boolean
) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (of_jobtype IS NULL OR j.jobtype = of_jobtype)
       AND (q IS NULL
            OR coalesce(werk_job_words(j.errtype, j.message, j.args, j.custom) @@ search, false))
       AND (has_failed IS NULL OR (j.failed_at IS NOT NULL) = has_failed)
$$;
