-- One node at a time vacuums the job table (a session lock on the connection that vacuums).
SELECT pg_try_advisory_lock($1)
