-- Held until the migrating transaction ends (see werk.db.migrate).
SELECT pg_advisory_xact_lock($1)
