-- The end of the work lock_try.sql began.
SELECT pg_advisory_unlock($1)
