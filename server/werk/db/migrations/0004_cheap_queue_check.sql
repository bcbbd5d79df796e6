-- The queue-name CHECK is evaluated for every row written, and every claim, fail or extend writes
-- a new row version. Its regex '^[A-Za-z0-9._-]{1,100}$' is slow to evaluate: the bounded
-- repetition is what is slow in PostgreSQL's regex engine. The same rule as a one-or-more match
-- plus a length bound is a fraction of the cost. Every character the class admits is ASCII, so
-- length() counts exactly what {1,100} did.
ALTER TABLE werk_jobs DROP CONSTRAINT werk_jobs_queue_check,
    ADD CONSTRAINT werk_jobs_queue_check
        CHECK (queue ~ '^[A-Za-z0-9._-]+$' AND length(queue) <= 100);
ALTER TABLE werk_queues DROP CONSTRAINT werk_queues_name_check,
    ADD CONSTRAINT werk_queues_name_check
        CHECK (name ~ '^[A-Za-z0-9._-]+$' AND length(name) <= 100);
