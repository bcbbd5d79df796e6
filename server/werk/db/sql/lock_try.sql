-- One node at a time does the work this key $1 stands for (the VACUUM of the job table, the
-- build of the search index over available jobs): a session lock on the connection doing it,
-- held until lock_release.sql or the end of its session.
SELECT pg_try_advisory_lock($1)
