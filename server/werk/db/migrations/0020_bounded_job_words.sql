-- A job's words (0011_job_search.sql) are bounded. PostgreSQL refuses a tsvector over 1 MiB, and
-- the body size limit let a job through whose words made one (many distinct words, or letters
-- that grow when lowercased): every statement that wrote the job into a words index failed, so
-- its fail, ack or kill could not happen, and the maintenance pass that promoted or expired it
-- failed for every queue.
--
-- A job whose errtype, message, args and custom come to at most 65,536 bytes as text keeps every
-- word, as before. Of a larger job, the words of its first 65,536 characters count: errtype,
-- message, then the values of args and custom in document order. That many characters make well
-- under 1 MiB of words, whatever the characters are.

-- The size that decides between the two: the bytes of the four as text.
CREATE FUNCTION werk_job_text_bytes(errtype text, message text, args jsonb, custom jsonb)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(octet_length(errtype), 0)::bigint + coalesce(octet_length(message), 0)
           + coalesce(octet_length(args::text), 0) + coalesce(octet_length(custom::text), 0)
$$;

-- The strings, numbers and booleans of a document, in document order, space-separated: the words
-- jsonb_to_tsvector reads.
CREATE FUNCTION werk_json_words(doc jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT string_agg(v #>> '{}', ' ')
    FROM jsonb_path_query(
        doc, 'strict $.** ? (@.type() == "string" || @.type() == "number" || @.type() == "boolean")'
    ) AS v
$$;

-- Still a plain expression (nothing in it merely stable), so PostgreSQL inlines it into the index
-- expressions and the operators' filter as before.
CREATE OR REPLACE FUNCTION werk_job_words(errtype text, message text, args jsonb, custom jsonb)
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN werk_job_text_bytes(errtype, message, args, custom) <= 65536
        THEN to_tsvector('simple'::regconfig, coalesce(errtype, '') || ' ' || coalesce(message, ''))
             || jsonb_to_tsvector('simple'::regconfig, args, '["string", "numeric", "boolean"]')
             || jsonb_to_tsvector('simple'::regconfig, custom, '["string", "numeric", "boolean"]')
        ELSE to_tsvector('simple'::regconfig,
                         left(coalesce(errtype, '') || ' ' || coalesce(message, '') || ' '
                              || coalesce(werk_json_words(args), '') || ' '
                              || coalesce(werk_json_words(custom), ''), 65536))
    END
$$;

-- An index entry made before holds every word of its job; the entries of jobs over the bound are
-- made again, so that the indexes and the filter agree. Indexes still being built (the available
-- one, which search_index_create.sql builds concurrently) are left to their builder.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM werk_stored_jobs j
               WHERE werk_job_text_bytes(j.errtype, j.message, j.args, j.custom) > 65536) THEN
        REINDEX INDEX werk_jobs_words_idx;
        REINDEX INDEX werk_completed_jobs_words_idx;
        IF EXISTS (SELECT 1 FROM pg_index
                   WHERE indexrelid = to_regclass('werk_jobs_available_words_idx')
                     AND indisvalid) THEN
            REINDEX INDEX werk_jobs_available_words_idx;
        END IF;
    END IF;
END
$$;
