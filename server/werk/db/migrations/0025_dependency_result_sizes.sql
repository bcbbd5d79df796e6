-- The size of each dependency's result as the API writes it (the text of its JSON), kept with
-- the edge when the result is copied there. A fetch, or a read of a job, carries its jobs'
-- dependency results only up to a budget of bytes per answer (a job may have thousands of
-- dependencies, each with a result of up to WERK_MAX_RESULT_BYTES); the statement that reads
-- the edges adds these sizes up in order, so the results it leaves out are never rendered.
ALTER TABLE werk_job_deps
    ADD COLUMN result_size integer GENERATED ALWAYS AS (octet_length(result::text)) STORED;
