-- The queue-name CHECK is evaluated for every row written, and every claim, fail or extend writes
-- a new row version. Its regex '^[A-Za-z0-9._-]{1,100}$' cost 3.2 us per evaluation, about a
-- seventh of a pushed job's database time; the same rule as a one-or-more match plus a length
-- bound costs 0.55 us (each measured over 1,000,000 names; bench/README.md "What it took"): the
-- bounded repetition is what is slow in PostgreSQL's regex engine. Every character the class admits is
-- ASCII, so length() counts exactly what {1,100} did.
ALTER TABLE werk_jobs DROP CONSTRAINT werk_jobs_queue_check,
    ADD CONSTRAINT werk_jobs_queue_check
        CHECK (queue ~ '^[A-Za-z0-9._-]+$' AND length(queue) <= 100);
ALTER TABLE werk_queues DROP CONSTRAINT werk_queues_name_check,
    ADD CONSTRAINT werk_queues_name_check
        CHECK (name ~ '^[A-Za-z0-9._-]+$' AND length(name) <= 100);
